#!/bin/bash
# Run 44a (session 37): stage signals only where the side kernel's schedule waits (prefetch_signals=needed, the
# new default) against one per stage (prefetch_signals=all, as before): each model's schedule (44a_sched.lua),
# alternating fresh processes, and the tests the change touches on this GPU.
# On the lent GPU machine: bash docs/bench-data/run44/44a_signals.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/44a_gpu.txt 2>&1
for m in gemma-q4_k_m llama-q4_k_m gemma llama; do
  for h in prefetch_signals=needed prefetch_signals=all; do
    $B docs/bench-data/run44/44a_sched.lua --model $(model $m) --hint $h >> $OUT/44a_sched.jsonl 2>> $OUT/44a_err.txt
  done
done
for i in 1 2 3 4; do
  for m in gemma-q4_k_m llama-q4_k_m gemma; do
    for h in prefetch_signals=needed prefetch_signals=all; do
      $B recipes/bench/decode.lua --model $(model $m) --prompt-tokens 32 --tokens 128 --runs 1 --no-profile --hint $h \
        --label "$m $h" >> $OUT/44a_ab.jsonl 2>> $OUT/44a_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/44a_summary.txt <<'PY'
import json, sys, collections, statistics
for l in open(sys.argv[1] + "/44a_sched.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    print(d["model"].split("/")[-1], d["hints"][-1], "stages", d["prefetch_stages"], "ranges", d["prefetch_ranges"],
          "led", d["prefetch_led"], "signals", d["prefetch_signals"])
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/44a_ab.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-36s n=%d median %.1f min %.1f max %.1f | %s" % (k, len(v), statistics.median(v), min(v), max(v),
          " ".join("%.1f" % x for x in v)))
PY
cat $OUT/44a_summary.txt
for t in side_prefetch gpu_loop; do
  timeout 300 $B tests/lua/test_$t.lua > $OUT/44a_h100_t_$t.txt 2>&1; echo "test_$t rc=$? $(tail -1 $OUT/44a_h100_t_$t.txt)"
done
