#!/usr/bin/env bash
# Run 38c (session 31), nvidia-h100-x1: 38c_idle_warm.lua on both Q4_K_M models (5 s of idle GPU before each
# timed run; the clock warm-up for 0 / 100 / 300 / 1000 ms before it), the SM clock sampled every 20 ms.
set -u
. scripts/device/env.sh
Q=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu --format=csv,noheader -lms 20 > $OUT/38c_clock.csv 2>&1 &
SMI=$!
for m in $Q $LQ; do timeout 200 $B docs/bench-data/run38/38c_idle_warm.lua $m 5 2>&1 | tee -a $OUT/38c_idle.txt; done
kill $SMI
