#!/bin/bash
# Run 40k (session 33): the side prefetcher's workgroups (32, the default, against 16, and off) measured over
# fresh processes, since 40g found a process's decode varies 2-3 % with the prefetcher on (37k/37l had compared
# them with two processes per setting). Gemma 3 1B Q4_K_M and Llama 3.2 1B Q4_K_M, 5 processes per setting,
# alternating, one timed run of 128 tokens each, no profile. On the lent GPU machine:
# bash docs/bench-data/run40/40k_prefetch_groups.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/40k_gpu.txt 2>&1
for m in gemma-q4_k_m llama-q4_k_m; do
  path=$(model $m)
  $B run --model $path --ids 2,10,20 --max-tokens 16 > /dev/null 2>&1
  for i in 1 2 3 4 5; do
    for h in prefetch_groups=0 prefetch_groups=16 side_prefetch=off; do
      $B recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 1 --no-profile --hint $h \
        --label "$m $h $i" >> $OUT/40k_decode.jsonl 2>> $OUT/40k_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/40k_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/40k_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, h, i = d["label"].split()
    g[(m, h)].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-14s %-20s n=%d median %.1f min %.1f max %.1f | %s" % (k[0], k[1], len(v), statistics.median(v), min(v),
          max(v), " ".join("%.1f" % x for x in v)))
PY
cat $OUT/40k_summary.txt
