#!/bin/bash
# Run 44c (session 37): q/k/v and o on their Q4_K / Q6_K blocks (q_matmul=fused) against their f16 copies (the
# default on the H100, chosen in sessions 9-14 before gemv_q took int8 activations per matrix), over alternating
# fresh processes, and one profiled process each.
# On the lent GPU machine: bash docs/bench-data/run44/44c_q_matmul.sh
. scripts/device/env.sh
for m in llama-q4_k_m gemma-q4_k_m; do
  for h in q_matmul=fused q_matmul=auto; do
    $B recipes/bench/decode.lua --model $(model $m) --prompt-tokens 32 --tokens 128 --runs 1 --hint $h \
      --label "$m $h prof" >> $OUT/44c_prof.jsonl 2>> $OUT/44c_err.txt
  done
done
for i in 1 2 3; do
  for m in llama-q4_k_m gemma-q4_k_m; do
    for h in q_matmul=fused q_matmul=auto; do
      $B recipes/bench/decode.lua --model $(model $m) --prompt-tokens 32 --tokens 128 --runs 1 --no-profile --hint $h \
        --label "$m $h" >> $OUT/44c_ab.jsonl 2>> $OUT/44c_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/44c_summary.txt <<'PY'
import json, sys, collections, statistics
for l in open(sys.argv[1] + "/44c_prof.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    print(d["label"], "%.1f" % d["decode_tok_s"], json.dumps({k: round(v, 4) for k, v in d["gpu_ms_per_kernel"].items()}))
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/44c_ab.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-34s n=%d median %.1f min %.1f max %.1f | %s" % (k, len(v), statistics.median(v), min(v), max(v),
          " ".join("%.1f" % x for x in v)))
PY
cat $OUT/44c_summary.txt
