#!/bin/bash
# Run 57a (session 51): `doppler tune --prefill` (new in session 51) on the lent GPU, and what its winners give.
# In order, each stage only while LIMIT leaves it time:
#   1. test_tune.lua (the --prefill cases take the cooperative-matrix knobs here) and test_attention_cm.lua;
#   2. for Llama 3.2 1B, Qwen3 0.6B and Gemma 3 1B (synthetic, F16): `doppler tune --prefill` at 512 tokens (the
#      full candidate set, its JSON to 57a_tune.jsonl, progress to 57a_tune_err.txt), then recipes/bench/prefill.lua
#      at 512 tokens with the tuned cache and with tune=off, two rounds alternating, one fresh process each;
#   3. 56e's open question: Llama's 16000-token prefill under the landed auto (s1r8k16) against s1r4k64.
# On the lent GPU machine: LIMIT=540 bash docs/bench-data/run57/57a_tune_prefill.sh
. scripts/device/env.sh
RUN=57a; . docs/bench-data/run56/prefill_lib.sh   # run, cfg, prefill_summary
export DOPPLER_GPU_TIMEOUT_MS=30000
T0=$(date +%s); LIMIT=${LIMIT:-540}
left() { [ $(( $(date +%s) - T0 )) -lt $(( LIMIT - $1 )) ]; }
log() { echo "$* $(( $(date +%s) - T0 )) s" >> $OUT/57a_log.txt; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/57a_gpu.txt 2>&1
( model llama > /dev/null; log "llama made"; model qwen > /dev/null; log "qwen made"; model gemma > /dev/null
  log "gemma made" ) &
for t in tune attention_cm; do
  timeout 150 $B tests/lua/test_$t.lua >> $OUT/57a_tests.txt 2>&1
  log "test_$t rc=$? ($(tail -1 $OUT/57a_tests.txt))"
done
wait
for m in llama qwen gemma; do
  case $m in llama) P=$L ;; qwen) P=$Q ;; gemma) P=$G ;; esac
  left 120 || { log "$m: no time left"; continue; }
  echo "== $m" >> $OUT/57a_tune_err.txt
  timeout 200 $B tune --model $P --prefill --json >> $OUT/57a_tune.jsonl 2>> $OUT/57a_tune_err.txt
  log "$m tune rc=$?"
  for r in 1 2; do
    left 20 && run "$m/p512/tuned/r$r" $P 512
    left 20 && run "$m/p512/tune-off/r$r" $P 512 tune=off
  done
done
left 60 && run "llama/p16000/auto" $L 16000
left 60 && run "llama/p16000/s1r4k64" $L 16000 $(cfg s1r4k64)
prefill_summary
log total
cat $OUT/57a_gpu.txt $OUT/57a_summary.txt $OUT/57a_log.txt
grep -v '^ok' $OUT/57a_tests.txt | head -20; grep -h 'tuned\|kept\|picked\|wrote' $OUT/57a_tune_err.txt; tail -5 $OUT/57a_err.txt
