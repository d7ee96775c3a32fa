#!/bin/bash
# Run 43g (session 36), timing only: what the side prefetcher's stage signals cost the main queue by themselves.
# 8ddbbd6 with 43g_signals_only_experiment.diff (DP_SIGNALS_ONLY=1: the recording keeps its signal dispatches,
# one per stage, but the side kernel is never submitted) against the prefetcher off (no signals) and on (the
# default); alternating fresh processes, 4 each, both Q4_K_M models.
# On the lent GPU machine: bash docs/bench-data/run43/43g_signals.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/43g_gpu.txt 2>&1
for i in 1 2 3 4; do
  for m in gemma-q4_k_m llama-q4_k_m; do
    for v in on off signals; do
      h=side_prefetch=auto; [ $v = off ] && h=side_prefetch=off
      e=; [ $v = signals ] && e=DP_SIGNALS_ONLY=1
      env $e $B recipes/bench/decode.lua --model $(model $m) --prompt-tokens 32 --tokens 128 --runs 1 \
        --no-profile --hint $h --label "$m $v" >> $OUT/43g_decode.jsonl 2>> $OUT/43g_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/43g_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/43g_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-22s n=%d median %.1f min %.1f max %.1f | %s" % (k, len(v), statistics.median(v), min(v), max(v),
          " ".join("%.1f" % x for x in v)))
PY
cat $OUT/43g_summary.txt
