#!/bin/bash
# Run 41b (session 34): the quantised LM head taking its row blocks from a queue (DP_LMH_QUEUE, hint
# lm_head_queue, tickets of lm_head_ticket team blocks) against the fixed shares (lm_head_queue=off), with the
# side prefetcher's default 32 workgroups and with 16. Gemma 3 1B Q4_K_M and Llama 3.2 1B Q4_K_M: per-kernel GPU
# time (--profile, one process per setting), then decode tok/s (3 fresh processes per setting, alternating, no
# profile). Then the tests the change touches, on this GPU. On the lent GPU machine:
# bash docs/bench-data/run41/41b_head_queue.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/41b_gpu.txt 2>&1
SETS="lm_head_queue=off lm_head_queue=on lm_head_ticket=1 lm_head_ticket=2 lm_head_queue=off,prefetch_groups=16 lm_head_queue=on,prefetch_groups=16"
for m in gemma-q4_k_m llama-q4_k_m; do
  path=$(model $m)
  $B run --model $path --ids 2,10,20 --max-tokens 16 > /dev/null 2>&1
  for h in $SETS; do
    hh=; for x in ${h//,/ }; do hh="$hh --hint $x"; done
    $B recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 1 $hh \
      --label "$m $h p" >> $OUT/41b_profile.jsonl 2>> $OUT/41b_err.txt
  done
  for i in 1 2 3; do
    for h in $SETS; do
      hh=; for x in ${h//,/ }; do hh="$hh --hint $x"; done
      $B recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 1 --no-profile $hh \
        --label "$m $h $i" >> $OUT/41b_decode.jsonl 2>> $OUT/41b_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/41b_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/41b_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, h, i = d["label"].split()
    g[(m, h)].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-14s %-40s n=%d median %.1f min %.1f max %.1f | %s" % (k[0], k[1], len(v), statistics.median(v), min(v),
          max(v), " ".join("%.1f" % x for x in v)))
for l in open(sys.argv[1] + "/41b_profile.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    k = d["gpu_ms_per_kernel"]
    print("%-52s %.1f tok/s gpu %.4f | %s" % (d["label"], d["decode_tok_s"], d["gpu_ms_per_token"],
          " ".join("%s %.4f" % (n, k[n]) for n in sorted(k))))
PY
cat $OUT/41b_summary.txt
for t in lm_head_fusion gpu_loop gguf_fixtures; do
  $B tests/lua/test_$t.lua > $OUT/41b_h100_t_$t.txt 2>&1; echo "test_$t rc=$? $(tail -1 $OUT/41b_h100_t_$t.txt)"
done
