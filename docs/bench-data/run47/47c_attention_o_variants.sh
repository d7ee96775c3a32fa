#!/bin/bash
# Run 47c (session 40): 47b found the fusion attention_o no faster by the wall clock (Gemma 3 1B Q4_K_M 897.7
# against 909.4 tok/s without it) though its profile took 0.03 ms per token less GPU time. Variants, in fresh
# processes that alternate (4 rounds): without the side prefetcher (is the loss its schedule's, which loses
# o's stage?), and other rows of W_o per o workgroup (attention_o_rows 2: 576 o workgroups; 32: 36), on
# Gemma 3 1B and Llama 3.2 1B Q4_K_M.
# On the lent GPU machine: bash docs/bench-data/run47/47c_attention_o_variants.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
t0=$(date +%s)
GQ=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
echo "models $(( $(date +%s) - t0 )) s" >> $OUT/47c_summary.txt
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2 --no-profile"
run() {  # model label hints...
  local m=$1 l=$2; shift 2
  timeout 60 $B $D --model $m "$@" --label "$(basename $m) $l" >> $OUT/47c_ab.jsonl 2>> $OUT/47c_err.txt
}
for i in 1 2 3 4; do
  for m in $GQ $LQ; do
    run $m "on" 
    run $m "off" --hint fusion=-attention_o
    run $m "on prefetch-off" --hint side_prefetch=off
    run $m "off prefetch-off" --hint fusion=-attention_o --hint side_prefetch=off
    run $m "on rows=2" --hint attention_o_rows=2
    run $m "on rows=32" --hint attention_o_rows=32
  done
done
python3 - "$OUT" >> $OUT/47c_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/47c_ab.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k in sorted(g):
    v = g[k]
    print("%-36s median %.1f  min %.1f  max %.1f  n %d  %s" % (k, statistics.median(v), min(v), max(v), len(v), " ".join("%.1f" % x for x in v)))
PY
echo "total $(( $(date +%s) - t0 )) s" >> $OUT/47c_summary.txt
cat $OUT/47c_summary.txt
