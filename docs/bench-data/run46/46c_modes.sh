#!/bin/bash
# Run 46c (session 39): 46b found Gemma 3 1B F16 with glu_down=on bimodal across fresh processes (1.32-1.34 ms
# per token in 6 of 9, 1.405 in 3; steady within a process), glu_down=auto steady at ~1.38. Is the side
# prefetcher (a kernel on a second queue that reads the next stages' weights into L2, paced by the main
# queue's stage signals) what a process draws? Each combination of glu_down and side_prefetch in 6 fresh
# processes, alternating; the same for Gemma Q4_K_M (whose fused MLP is on by default) and Llama 3.2 1B F16.
# On the lent GPU machine: bash docs/bench-data/run46/46c_modes.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
t0=$(date +%s)
G16=$(model gemma); L16=$(model llama); GQ=$(model gemma-q4_k_m)
echo "models $(( $(date +%s) - t0 )) s" > $OUT/46c_summary.txt
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2 --no-profile"
for i in 1 2 3 4 5 6; do
  for g in auto on; do for sp in auto off; do
    timeout 60 $B $D --model $G16 --hint glu_down=$g --hint side_prefetch=$sp --label "gemma-f16 glu_down=$g side_prefetch=$sp" >> $OUT/46c_ab.jsonl 2>> $OUT/46c_err.txt
  done; done
  for sp in auto off; do
    timeout 60 $B $D --model $GQ --hint side_prefetch=$sp --label "gemma-q4_k_m side_prefetch=$sp" >> $OUT/46c_ab.jsonl 2>> $OUT/46c_err.txt
  done
  [ $i -le 4 ] && for g in auto on; do
    timeout 60 $B $D --model $L16 --hint glu_down=$g --label "llama-f16 glu_down=$g" >> $OUT/46c_ab.jsonl 2>> $OUT/46c_err.txt
  done
done
python3 - "$OUT/46c_ab.jsonl" >> $OUT/46c_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in sorted(g.items()):
    # runs come in pairs (one process, --runs 2)
    procs = ["%.1f/%.1f" % (v[i], v[i + 1]) for i in range(0, len(v) - 1, 2)]
    print("%-44s n=%d median %.1f min %.1f max %.1f | %s" % (k, len(v), statistics.median(v), min(v), max(v), " ".join(procs)))
PY
echo "total $(( $(date +%s) - t0 )) s" >> $OUT/46c_summary.txt
cat $OUT/46c_summary.txt; tail -3 $OUT/46c_err.txt
