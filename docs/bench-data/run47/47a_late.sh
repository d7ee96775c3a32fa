#!/bin/bash
# Run 47a (session 40): session 39 found Gemma 3 1B F16 with glu_down=on decoding at ~750 or ~708 tok/s per
# fresh process with the side prefetcher. Is the side kernel late (the main queue already past the stages it
# reaches) in the slow processes, and does prefetch_skip (leave late stages unread) make them fast?
# The late stage of scripts/device/h100-bench.sh (5 fresh processes per prefetch_skip setting, alternating),
# then the same counts for Gemma 3 1B Q4_K_M and Llama 3.2 1B Q4_K_M with the defaults (2 processes each).
# On the lent GPU machine: bash docs/bench-data/run47/47a_late.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
t0=$(date +%s)
STAGES=late bash scripts/device/h100-bench.sh > $OUT/47a_summary.txt 2>&1
echo "late stage $(( $(date +%s) - t0 )) s" >> $OUT/47a_summary.txt
GQ=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2 --no-profile"
for i in 1 2; do
  for m in $GQ $LQ; do
    timeout 60 $B $D --model $m --label "q4 $(basename $m)" >> $OUT/47a_q4.jsonl 2>> $OUT/err.txt
  done
done
python3 - "$OUT/47a_q4.jsonl" >> $OUT/47a_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["label"], "run %d decode %.1f stages/tok %.2f late/tok %.2f skipped/tok %.2f" % (d["run"], d["decode_tok_s"],
              d["prefetch_stages_per_token"], d["prefetch_late_per_token"], d["prefetch_skipped_per_token"]))
PY
echo "total $(( $(date +%s) - t0 )) s" >> $OUT/47a_summary.txt
