#!/bin/bash
# Run 46f (session 39): 46e kept each process's mode through 5 sessions (weights uploaded again) and new recordings
# (new side kernels), so what a process draws may come with its device: its queues. DOPPLER_SIDE_QUEUE=F.I (new)
# takes queue I of family F as the side queue instead of the first other compute family's first queue (auto).
# Gemma 3 1B F16 with glu_down=on (the bimodal case) for auto, 0.1 (a second queue of the main family) and 2.1,
# 5 fresh processes each, alternating; then the Q4_K_M models (default hints) with auto and 0.1, 3 each.
# On the lent GPU machine: bash docs/bench-data/run46/46f_side_queue.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
t0=$(date +%s)
G16=$(model gemma); GQ=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
echo "models $(( $(date +%s) - t0 )) s" > $OUT/46f_summary.txt
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2 --no-profile"
run() {   # side-queue label model hints...
  local q=$1 l=$2 m=$3; shift 3
  if [ $q = auto ]; then unset DOPPLER_SIDE_QUEUE; else export DOPPLER_SIDE_QUEUE=$q; fi
  timeout 60 $B $D --model $m "$@" --label "$l side=$q" >> $OUT/46f_ab.jsonl 2>> $OUT/46f_err.txt || echo "$l side=$q rc=$?" >> $OUT/46f_summary.txt
  unset DOPPLER_SIDE_QUEUE
}
for i in 1 2 3 4 5; do
  for q in auto 0.1 2.1; do run $q "gemma-f16 glu_down=on" $G16 --hint glu_down=on; done
  if [ $i -le 3 ]; then
    for q in auto 0.1; do run $q gemma-q4_k_m $GQ; run $q llama-q4_k_m $LQ; done
  fi
done
python3 - "$OUT/46f_ab.jsonl" >> $OUT/46f_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in sorted(g.items()):
    procs = ["%.1f/%.1f" % (v[i], v[i + 1]) for i in range(0, len(v) - 1, 2)]
    print("%-36s n=%d median %.1f min %.1f max %.1f | %s" % (k, len(v), statistics.median(v), min(v), max(v), " ".join(procs)))
PY
echo "total $(( $(date +%s) - t0 )) s" >> $OUT/46f_summary.txt
cat $OUT/46f_summary.txt; sort $OUT/46f_err.txt | uniq -c | sort -rn | head -5
