#!/bin/bash
# Run 40g (session 33): how decode speed spreads over fresh processes (40f: ~1.5 %, Llama Q4_K_M bimodal), and
# whether the side prefetcher is part of it: Llama 3.2 1B Q4_K_M and Gemma 3 1B Q4_K_M, 8 processes each with
# the defaults and 8 with side_prefetch=off, alternating; one timed run of 128 tokens per process.
# On the lent GPU machine: bash docs/bench-data/run40/40g_process_spread.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/40g_gpu.txt 2>&1
for m in llama-q4_k_m gemma-q4_k_m; do
  path=$(model $m)
  $B run --model $path --ids 2,10,20 --max-tokens 16 > /dev/null 2>&1
  for i in 1 2 3 4 5 6 7 8; do
    for pf in on off; do
      h=; [ $pf = off ] && h="--hint side_prefetch=off"
      $B recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 1 --no-profile $h \
        --label "$m prefetch=$pf $i" >> $OUT/40g_decode.jsonl 2>> $OUT/40g_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/40g_summary.txt <<'PY'
import json, sys, collections
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/40g_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, pf, i = d["label"].split()
    g[(m, pf)].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-14s %-16s n=%d min %.1f max %.1f spread %.2f %% | %s" % (k[0], k[1], len(v), min(v), max(v),
          100 * (max(v) / min(v) - 1), " ".join("%.1f" % x for x in v)))
PY
cat $OUT/40g_summary.txt
