#!/bin/bash
# Run 43e (session 36): at 8ddbbd6 (prefetch_lead 3 by default): the schedules it makes for the four models
# (43d_led.lua: stages whose reads moved), the default against prefetch_lead=1 (the schedule before) over four
# alternating fresh processes each, the issue-7 stage, and the tests the change touches on this GPU.
# On the lent GPU machine: bash docs/bench-data/run43/43e_default_lead.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/43e_gpu.txt 2>&1
for m in gemma-q4_k_m llama-q4_k_m gemma llama; do
  for h in prefetch_lead=0 prefetch_lead=1; do
    $B docs/bench-data/run43/43d_led.lua --model $(model $m) --hint $h >> $OUT/43e_led.jsonl 2>> $OUT/43e_err.txt
  done
done
for i in 1 2 3 4; do
  for m in gemma-q4_k_m llama-q4_k_m; do
    for h in prefetch_lead=0 prefetch_lead=1; do
      $B recipes/bench/decode.lua --model $(model $m) --prompt-tokens 32 --tokens 128 --runs 1 --no-profile --hint $h \
        --label "$m $h" >> $OUT/43e_ab.jsonl 2>> $OUT/43e_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/43e_summary.txt <<'PY'
import json, sys, collections, statistics
for l in open(sys.argv[1] + "/43e_led.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    print(d["model"].split("/")[-1], d["hints"][-1], "stages", d["prefetch_stages"], "ranges", d["prefetch_ranges"], "led", d["prefetch_led"])
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/43e_ab.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-30s n=%d median %.1f min %.1f max %.1f | %s" % (k, len(v), statistics.median(v), min(v), max(v),
          " ".join("%.1f" % x for x in v)))
PY
cat $OUT/43e_summary.txt
OUT=$OUT/43e_issue7 STAGES=issue7 bash scripts/device/h100-bench.sh > $OUT/43e_issue7_run.txt 2>&1
tail -12 $OUT/43e_issue7_run.txt
for t in side_prefetch gpu_loop gguf_fixtures; do
  timeout 300 $B tests/lua/test_$t.lua > $OUT/43e_h100_t_$t.txt 2>&1; echo "test_$t rc=$? $(tail -1 $OUT/43e_h100_t_$t.txt)"
done
