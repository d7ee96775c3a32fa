#!/bin/bash
# Run 56f (session 50): the tests only, for a call of little device time: test_attention_cm.lua (every split /
# keys / rows variant against the reference, and the 3 cases 56a's plans could not fit), then the fixture-model
# tests whose prefills run attention_prefill_cm under the landed auto. On the lent GPU machine:
# bash docs/bench-data/run56/56f_tests_short.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=30000
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/56f_gpu.txt 2>&1
for t in attention_cm families_fixtures gemma3_fixtures; do
  timeout 50 $B tests/lua/test_$t.lua > $OUT/56f_test_$t.txt 2>&1
  echo "test_$t rc=$? ($(tail -1 $OUT/56f_test_$t.txt)) $(( $(date +%s) - T0 )) s" >> $OUT/56f_log.txt
done
cat $OUT/56f_gpu.txt $OUT/56f_log.txt; grep -h -v '^ok' $OUT/56f_test_*.txt | head -20
