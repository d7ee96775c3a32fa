#!/bin/bash
# Run 44b (session 37), timing only: the compute -> compute barrier between dependent dispatches without its memory
# barrier (an execution dependency alone: DOPPLER_EXP_BARRIER=exec, 44b_exec_barrier_experiment.diff, not
# committed; outside what Vulkan guarantees, so its results may be wrong) against the barrier as it is, over
# alternating fresh processes, one profiled process each, and test_gpu_loop with it.
# On the lent GPU machine: bash docs/bench-data/run44/44b_exec_barrier.sh
. scripts/device/env.sh
for m in gemma-q4_k_m llama-q4_k_m; do
  for e in DOPPLER_EXP_BARRIER=1 DOPPLER_NONE=1; do
    env $e $B recipes/bench/decode.lua --model $(model $m) --prompt-tokens 32 --tokens 128 --runs 1 \
      --label "$m $e prof" >> $OUT/44b_prof.jsonl 2>> $OUT/44b_err.txt
  done
done
for i in 1 2 3; do
  for m in gemma-q4_k_m llama-q4_k_m; do
    for e in DOPPLER_EXP_BARRIER=1 DOPPLER_NONE=1; do
      env $e $B recipes/bench/decode.lua --model $(model $m) --prompt-tokens 32 --tokens 128 --runs 1 --no-profile \
        --label "$m $e" >> $OUT/44b_ab.jsonl 2>> $OUT/44b_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/44b_summary.txt <<'PY'
import json, sys, collections, statistics
for l in open(sys.argv[1] + "/44b_prof.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    print(d["label"], "%.1f" % d["decode_tok_s"], json.dumps({k: round(v, 4) for k, v in d["gpu_ms_per_kernel"].items()}))
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/44b_ab.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-40s n=%d median %.1f min %.1f max %.1f | %s" % (k, len(v), statistics.median(v), min(v), max(v),
          " ".join("%.1f" % x for x in v)))
PY
cat $OUT/44b_summary.txt
DOPPLER_EXP_BARRIER=1 timeout 300 $B tests/lua/test_gpu_loop.lua > $OUT/44b_h100_t_gpu_loop_exec.txt 2>&1
echo "test_gpu_loop (exec barrier) rc=$? $(tail -1 $OUT/44b_h100_t_gpu_loop_exec.txt)"
