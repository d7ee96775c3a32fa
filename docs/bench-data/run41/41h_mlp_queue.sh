#!/bin/bash
# Run 41h (session 34): the fused MLP taking its row blocks from a queue (gemv_q.comp's DP_MQUEUE, hint
# glu_down_queue) against one block per workgroup, at the default geometry (32 rows, 256 invocations) and at
# geometries with more lanes per row (16 rows / 256: 16 lanes; 8 rows / 256: 32 lanes), which 37a found slower
# when every block had a workgroup of its own. First test_glu_down on this GPU; then per model (Gemma 3 1B
# Q4_K_M, Llama 3.2 1B Q4_K_M) one profiled process and 2 fresh processes of decode per setting, alternating.
# On the lent GPU machine: bash docs/bench-data/run41/41h_mlp_queue.sh
. scripts/device/env.sh
$B tests/lua/test_glu_down.lua > $OUT/41h_h100_t_glu_down.txt 2>&1; echo "test_glu_down rc=$? $(tail -1 $OUT/41h_h100_t_glu_down.txt)"
SETS="glu_down_queue=off glu_down_queue=on glu_down_rows=16,glu_down_queue=off glu_down_rows=16,glu_down_queue=on glu_down_rows=8,glu_down_queue=on"
for m in gemma-q4_k_m llama-q4_k_m; do
  path=$(model $m)
  for i in p 1 2; do
    for h in $SETS; do
      hh=; for x in ${h//,/ }; do hh="$hh --hint $x"; done
      np=--no-profile; [ $i = p ] && np=
      $B recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 1 $np $hh \
        --label "$m $h $i" >> $OUT/41h_decode.jsonl 2>> $OUT/41h_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/41h_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
prof = {}
for l in open(sys.argv[1] + "/41h_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, h, i = d["label"].split()
    g[(m, h)].append(d["decode_tok_s"])
    if i == "p": prof[(m, h)] = d["gpu_ms_per_kernel"].get("gemv_q", 0)
for k, v in g.items():
    print("%-14s %-40s gemv_q %.4f ms | decode %s" % (k[0], k[1], prof.get(k, 0), " ".join("%.1f" % x for x in v)))
PY
cat $OUT/41h_summary.txt
