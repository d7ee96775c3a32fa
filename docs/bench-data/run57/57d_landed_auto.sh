#!/bin/bash
# Run 57d (session 51): the head_dim-256 auto of attention_prefill_cm_rows now 2 (57b, 57c), checked on the GPU:
# test_attention_cm.lua (every variant against the reference, the auto rule); Gemma 3 1B F16 prefill at 512 /
# 3900 / 16000 tokens under the new auto and under attention_prefill_cm_rows=1 (the old plan), one process each;
# and 57a's tune winner for Qwen3 0.6B F16, gemm_cm_tile=128x64, as a hint against the auto at 512 and 3900 tokens
# (the bench scripts never read the tune cache, so 57a's "tuned" runs had run the defaults), two rounds
# alternating, one fresh process each. On the lent GPU machine: bash docs/bench-data/run57/57d_landed_auto.sh
. scripts/device/env.sh
RUN=57d; . docs/bench-data/run56/prefill_lib.sh
T0=$(date +%s); log() { echo "$* $(( $(date +%s) - T0 )) s" >> $OUT/57d_log.txt; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/57d_gpu.txt 2>&1
( model gemma > /dev/null; log "gemma made"; model qwen > /dev/null; log "qwen made" ) &
if [ "${NO_TESTS:-0}" = 0 ]; then   # NO_TESTS=1: the timings alone (57a and 57b ran every variant's test)
  timeout 150 $B tests/lua/test_attention_cm.lua > $OUT/57d_test_attention_cm.txt 2>&1
  log "test_attention_cm rc=$? ($(tail -1 $OUT/57d_test_attention_cm.txt))"
fi
wait
for pt in 512 3900 16000; do
  run "gemma/p$pt/auto" $G $pt
  run "gemma/p$pt/rows1" $G $pt attention_prefill_cm_rows=1
done
for r in 1 2; do
  for pt in 512 3900; do
    run "qwen/p$pt/auto/r$r" $Q $pt
    run "qwen/p$pt/tile128x64/r$r" $Q $pt gemm_cm_tile=128x64
  done
done
prefill_summary; log total
cat $OUT/57d_gpu.txt $OUT/57d_summary.txt $OUT/57d_log.txt; grep -sv '^ok' $OUT/57d_test_attention_cm.txt | head; tail -3 $OUT/57d_err.txt
