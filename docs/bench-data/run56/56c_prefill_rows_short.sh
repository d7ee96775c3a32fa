#!/bin/bash
# Run 56c (session 49): 56a cut to what a short call holds, for when little device time is left: the tests of
# the patch's kernel (test_attention_cm.lua, test_attention_long.lua), then Llama 3.2 1B F16 prefill at 3900 and
# 16000 tokens with today's plan (s4r1k16) against the patch's auto and s1r4k32. Needs the patch, as 56a.
# On the lent GPU machine: LIMIT=300 bash docs/bench-data/run56/56c_prefill_rows_short.sh
grep -q attention_prefill_cm_rows lua/lib/doppler/hints.lua ||
  { echo "56c: apply docs/bench-data/run56/prefill_rows.patch first" >&2; exit 1; }
. scripts/device/env.sh
RUN=56c; . docs/bench-data/run56/prefill_lib.sh   # run, cfg, prefill_summary
export DOPPLER_GPU_TIMEOUT_MS=30000
T0=$(date +%s); LIMIT=${LIMIT:-300}
left() { [ $(( $(date +%s) - T0 )) -lt $(( LIMIT - $1 )) ]; }
log() { echo "$* $(( $(date +%s) - T0 )) s" >> $OUT/56c_log.txt; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/56c_gpu.txt 2>&1
( path=$(model llama); log "llama made" ) &   # the model is made while the tests run
timeout 120 $B tests/lua/test_attention_cm.lua > $OUT/56c_test_attention_cm.txt 2>&1
log "test_attention_cm rc=$? ($(tail -1 $OUT/56c_test_attention_cm.txt))"
timeout 40 $B tests/lua/test_attention_long.lua > $OUT/56c_test_attention_long.txt 2>&1
log "test_attention_long rc=$? ($(tail -1 $OUT/56c_test_attention_long.txt))"
wait
for pt in 3900 16000; do
  for c in s4r1k16 auto s1r4k32; do
    left 25 && run "llama/p$pt/$c" $L $pt $(cfg $c)
  done
done
prefill_summary
log total
cat $OUT/56c_gpu.txt $OUT/56c_summary.txt $OUT/56c_log.txt; tail -5 $OUT/56c_err.txt
