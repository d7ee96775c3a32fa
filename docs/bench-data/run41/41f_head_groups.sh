#!/bin/bash
# Run 41f (session 34): the quantised head's workgroups now that it takes its rows from a queue (ecb08de):
# lm_head_groups 1024 (default), 528 (4 per SM on 132 SMs), 768 and 2048. Gemma 3 1B Q4_K_M and Llama 3.2 1B
# Q4_K_M: per-kernel GPU time (one profiled process per setting), decode tok/s (3 fresh processes per setting,
# alternating, no profile). On the lent GPU machine: bash docs/bench-data/run41/41f_head_groups.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/41f_gpu.txt 2>&1
SETS="lm_head_groups=0 lm_head_groups=528 lm_head_groups=768 lm_head_groups=2048"
for m in gemma-q4_k_m llama-q4_k_m; do
  path=$(model $m)
  for h in $SETS; do
    $B recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 1 --hint $h \
      --label "$m $h p" >> $OUT/41f_profile.jsonl 2>> $OUT/41f_err.txt
  done
  for i in 1 2 3; do
    for h in $SETS; do
      $B recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 1 --no-profile --hint $h \
        --label "$m $h $i" >> $OUT/41f_decode.jsonl 2>> $OUT/41f_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/41f_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/41f_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, h, i = d["label"].split()
    g[(m, h)].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-14s %-20s n=%d median %.1f min %.1f max %.1f | %s" % (k[0], k[1], len(v), statistics.median(v), min(v),
          max(v), " ".join("%.1f" % x for x in v)))
for l in open(sys.argv[1] + "/41f_profile.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    k = d["gpu_ms_per_kernel"]
    print("%-36s %.1f tok/s gpu %.4f | lm_head_q %.4f" % (d["label"], d["decode_tok_s"], d["gpu_ms_per_token"], k.get("lm_head_q", 0)))
PY
cat $OUT/41f_summary.txt
