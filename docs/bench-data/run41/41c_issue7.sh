#!/bin/bash
# Run 41c (session 34): the issue-7 stage at the session's code (the quantised head's row queue, 8a68371, and
# the interpreter's generational collector, ecb08de), then, in the same call, the queue against the fixed
# shares (lm_head_queue=off) over 4 fresh processes each, alternating, for both Q4_K_M models, and the tests
# the changes touch on this GPU. On the lent GPU machine: bash docs/bench-data/run41/41c_issue7.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/41c_gpu.txt 2>&1
OUT=$OUT/41c_issue7 STAGES=issue7 bash scripts/device/h100-bench.sh > $OUT/41c_issue7_run.txt 2>&1
for i in 1 2 3 4; do
  for m in gemma-q4_k_m llama-q4_k_m; do
    for h in lm_head_queue=on lm_head_queue=off; do
      $B recipes/bench/decode.lua --model $(model $m) --prompt-tokens 32 --tokens 128 --runs 1 --no-profile --hint $h \
        --label "$m $h $i" >> $OUT/41c_ab.jsonl 2>> $OUT/41c_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/41c_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/41c_ab.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, h, i = d["label"].split()
    g[(m, h)].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-14s %-20s n=%d median %.1f min %.1f max %.1f | %s" % (k[0], k[1], len(v), statistics.median(v), min(v),
          max(v), " ".join("%.1f" % x for x in v)))
PY
cat $OUT/41c_issue7_run.txt | tail -20; cat $OUT/41c_summary.txt
for t in lm_head_fusion gpu_loop gguf_fixtures bench; do
  $B tests/lua/test_$t.lua > $OUT/41c_h100_t_$t.txt 2>&1; echo "test_$t rc=$? $(tail -1 $OUT/41c_h100_t_$t.txt)"
done
