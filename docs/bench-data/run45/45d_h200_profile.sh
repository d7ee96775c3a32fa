#!/bin/bash
# Run 45d (session 38): where a decode token's GPU time goes on the nvidia-h200, by kernel (decode.lua's profile:
# GPU timestamps around each dispatch), for the four models with the side prefetcher off (with it on, its
# kernel runs beside the timed ones and the per-kernel times include its contention) and, for comparison, on.
# On the lent GPU machine: bash docs/bench-data/run45/45d_h200_profile.sh
. scripts/device/env.sh
for m in gemma-q4_k_m llama-q4_k_m gemma llama; do
  for sp in off auto; do
    timeout 120 $B recipes/bench/decode.lua --model $(model $m) --prompt-tokens 32 --tokens 128 --runs 1 \
      --hint side_prefetch=$sp --label "$m side_prefetch=$sp" >> $OUT/45d_profile.jsonl 2>> $OUT/45d_err.txt
  done
done
python3 - "$OUT" > $OUT/45d_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1] + "/45d_profile.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    k = d.get("gpu_ms_per_kernel") or {}
    print("%-32s decode %.1f tok/s  p50 %.4f ms  gpu ms/token %s" % (d["label"], d["decode_tok_s"] or 0, d["p50_ms"] or 0,
          d.get("gpu_ms_per_token")))
    for n, v in sorted(k.items(), key=lambda x: -x[1]):
        print("    %-28s %.4f" % (n, v))
PY
cat $OUT/45d_summary.txt; tail -3 $OUT/45d_err.txt
