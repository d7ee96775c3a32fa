#!/bin/bash
# Run 43f (session 36): with the reads started at light stages (prefetch_lead 3, the default since 8ddbbd6), the
# side kernel's size again for Gemma 3 1B Q4_K_M (37k/41b measured it with reads one stage ahead): workgroups
# (prefetch_groups) and invocations (prefetch_wg), alternating fresh processes; one profile each of the default
# and prefetch_groups=16. On the lent GPU machine: bash docs/bench-data/run43/43f_groups_with_lead.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/43f_gpu.txt 2>&1
M=$(model gemma-q4_k_m)
for i in 1 2 3 4; do
  for h in prefetch_groups=0 prefetch_groups=16 prefetch_groups=48 prefetch_wg=128 prefetch_wg=512; do
    $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --no-profile --hint $h \
      --label "$h" >> $OUT/43f_decode.jsonl 2>> $OUT/43f_err.txt
  done
done
for h in prefetch_groups=0 prefetch_groups=16; do
  $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --profile-tokens 16 --hint $h \
    --label "prof_$h" >> $OUT/43f_profile.jsonl 2>> $OUT/43f_err.txt
done
python3 - "$OUT" > $OUT/43f_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/43f_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-20s n=%d median %.1f min %.1f max %.1f | %s" % (k, len(v), statistics.median(v), min(v), max(v),
          " ".join("%.1f" % x for x in v)))
for l in open(sys.argv[1] + "/43f_profile.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    k = d.get("gpu_ms_per_kernel") or {}
    print(d["label"], "tok/s %.1f |" % d["decode_tok_s"], " ".join("%s %.4f" % (n, k[n]) for n in sorted(k)))
PY
cat $OUT/43f_summary.txt
