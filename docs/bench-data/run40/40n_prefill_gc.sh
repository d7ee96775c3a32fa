#!/bin/bash
# Run 40n (session 33): 40l again with Lua's generational mode beside the collector as it is and stopped,
# 8 runs per process; Gemma 3 1B Q4_K_M and F16, alternating, one process each, three times.
# On the lent GPU machine: bash docs/bench-data/run40/40n_prefill_gc.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/40n_gpu.txt 2>&1
for m in gemma-q4_k_m gemma; do
  path=$(model $m)
  $B run --model $path --ids 2,10,20 --max-tokens 16 > /dev/null 2>&1
  for round in 1 2 3; do
    for gc in default gen stop; do
      $B docs/bench-data/run40/40n_prefill_gc.lua $gc --model $path --runs 8 --no-profile --label "$m $gc $round" \
        >> $OUT/40n_prefill.jsonl 2>> $OUT/40n_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/40n_summary.txt <<'PY'
import json, sys, collections
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/40n_prefill.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["prefill_tok_s"])
for k, v in g.items():
    print("%-24s %s" % (k, " ".join("%.0f" % x for x in v)))
PY
cat $OUT/40n_summary.txt
