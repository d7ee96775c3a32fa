#!/bin/bash
# Run 56e (session 50, not yet run): after 56a, the auto of attention_prefill_cm_rows / _keys for head_dim <= 128
# is the most row tiles that fit (Llama 3.2 1B, head_dim 64: 8 row tiles of 16 keys; head_dim 128: 4 of 32), and
# 56a's three failures (head_dim 256 at split 1) take 2 row tiles of 32 keys. In order of need, each stage only
# while LIMIT leaves it time: test_attention_cm.lua; Llama 3.2 1B F16 prefill at 1024 / 3900 / 16000 tokens, the
# new auto against 56a's (s1r4k64); Qwen3 0.6B F16 (head_dim 128, whose auto no run has timed) at 1024 / 3900
# under five plans and at 16000 under two; the fixture-model tests under the new auto; Gemma 3 1B F16 at 512 /
# 3900 / 16000, its auto (s4r1k16) against s4r2k16 (56a's best at 512 and 3900), two rounds alternating; a second
# Llama round. One fresh process per run.
# On the lent GPU machine: LIMIT=540 bash docs/bench-data/run56/56e_prefill_rows_auto.sh
. scripts/device/env.sh
RUN=56e; . docs/bench-data/run56/prefill_lib.sh   # run, cfg, prefill_summary
export DOPPLER_GPU_TIMEOUT_MS=30000
T0=$(date +%s); LIMIT=${LIMIT:-540}
left() { [ $(( $(date +%s) - T0 )) -lt $(( LIMIT - $1 )) ]; }
log() { echo "$* $(( $(date +%s) - T0 )) s" >> $OUT/56e_log.txt; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/56e_gpu.txt 2>&1
( model llama > /dev/null; log "llama made"; model qwen > /dev/null; log "qwen made" ) &   # made during the test
timeout 120 $B tests/lua/test_attention_cm.lua > $OUT/56e_test_attention_cm.txt 2>&1
log "test_attention_cm rc=$? ($(tail -1 $OUT/56e_test_attention_cm.txt))"
wait
llama_round() {
  for pt in 1024 3900 16000; do
    for c in auto s1r4k64; do left 30 && run "llama/p$pt/$c/r$1" $L $pt $(cfg $c); done
  done
}
llama_round 1
( model gemma > /dev/null; log "gemma made" ) &
for pt in 1024 3900 16000; do
  for c in auto s4r1k16 s1r4k16 s1r2k32 s2r2k16; do
    [ $pt = 16000 ] && [ $c != auto ] && [ $c != s4r1k16 ] && continue
    left 60 && run "qwen/p$pt/$c" $Q $pt $(cfg $c)
  done
done
mkdir -p $OUT/56e_tests
for t in families_fixtures gemma3_fixtures; do
  left 45 || { log "test_$t not run (time)"; continue; }
  timeout 60 $B tests/lua/test_$t.lua > $OUT/56e_tests/test_$t.txt 2>&1
  log "test_$t rc=$? ($(tail -1 $OUT/56e_tests/test_$t.txt))"
done
wait
for r in 1 2; do
  for pt in 512 3900 16000; do
    for c in auto s4r2k16; do left 30 && run "gemma/p$pt/$c/r$r" $G $pt $(cfg $c); done
  done
done
llama_round 2
prefill_summary
log total
cat $OUT/56e_gpu.txt $OUT/56e_summary.txt $OUT/56e_log.txt; grep -v '^ok' $OUT/56e_test_attention_cm.txt | head -20
grep -h -v '^ok' $OUT/56e_tests/*.txt | head -20; tail -5 $OUT/56e_err.txt
