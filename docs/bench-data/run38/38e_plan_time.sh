#!/usr/bin/env bash
# Run 38e (session 31), nvidia-h100-x1: 38e_plan_time.lua on both Q4_K_M models (warm shader caches: a first
# process fills them), and test_warmup after 30fe649's fix of its device-dependent expectations.
set -u
. scripts/device/env.sh
Q=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
for m in $Q $LQ; do
  timeout 120 $B docs/bench-data/run38/38e_plan_time.lua $m > /dev/null 2>&1   # fills the caches
  for r in 1 2; do timeout 120 $B docs/bench-data/run38/38e_plan_time.lua $m 2>&1 | tee -a $OUT/38e_plan_time.txt; done
done
timeout 200 $B tests/lua/test_warmup.lua > $OUT/38e_h100_t_warmup.txt 2>&1; echo "test_warmup rc $?: $(tail -1 $OUT/38e_h100_t_warmup.txt)"
