#!/bin/bash
# Run 46b (session 39): 46a's tune of Gemma 3 1B F16 picked glu_down=on (1.3772 -> 1.3363 ms per token, wall
# clock, in its one process), and the picks then lost to the defaults over 3 alternating fresh processes
# (704.3 against 718.1 tok/s, 128 tokens). Which condition makes the fused float MLP look faster: the tune's
# length (32 decode steps after 32 prompt tokens, best of 2 runs), or its single process? Fresh processes at
# both lengths, alternating, then the tune of that knob alone in three processes (one at 128 steps).
# Beside it, the float LM head's time with 4 rows per workgroup (gemv_rows, which the head follows) by profile.
# On the lent GPU machine: bash docs/bench-data/run46/46b_glu_down_tuner.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
M=$(model gemma); t0=$(date +%s)
D="timeout 60 $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --no-profile"
for i in 1 2 3; do
  for g in auto on; do
    $D --tokens 32 --runs 2 --hint glu_down=$g --label "t32 glu_down=$g" >> $OUT/46b_ab.jsonl 2>> $OUT/46b_err.txt
    $D --tokens 128 --runs 1 --hint glu_down=$g --label "t128 glu_down=$g" >> $OUT/46b_ab.jsonl 2>> $OUT/46b_err.txt
  done
done
echo "A/B $(( $(date +%s) - t0 )) s" > $OUT/46b_summary.txt
python3 - "$OUT/46b_ab.jsonl" >> $OUT/46b_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append((d["decode_tok_s"], d["p50_ms"]))
for k, v in sorted(g.items()):
    print("%-18s n=%d median %.1f tok/s | %s" % (k, len(v), statistics.median(x[0] for x in v),
          " ".join("%.1f/%.4f" % x for x in v)))
PY
for t in 32 32 128; do
  timeout 120 $B tune --model $M --dry-run --knobs glu_down --tokens $t >> $OUT/46b_tune.txt 2>&1
  grep "glu_down=" $OUT/46b_tune.txt | tail -2 | sed "s/^/tokens $t: /" >> $OUT/46b_summary.txt
done
for h in "gemv_rows=0" "gemv_rows=4"; do
  timeout 60 $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --hint $h --label "profile $h" >> $OUT/46b_profile.jsonl 2>> $OUT/46b_err.txt
done
python3 - "$OUT/46b_profile.jsonl" >> $OUT/46b_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    k = d["gpu_ms_per_kernel"]
    print(d["label"], "decode %.1f" % d["decode_tok_s"], " ".join("%s %.4f" % kv for kv in sorted(k.items(), key=lambda kv: -kv[1])))
PY
echo "total $(( $(date +%s) - t0 )) s" >> $OUT/46b_summary.txt
cat $OUT/46b_summary.txt; tail -3 $OUT/46b_err.txt
