#!/bin/bash
# Run 39d (session 32): `doppler run`'s first token part by part (39d_ttft_parts.lua), three processes per model,
# caches warm. On the lent GPU machine: bash docs/bench-data/run39/39d_ttft_parts.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/39d_gpu.txt 2>&1
for m in gemma-q4_k_m gemma llama-q4_k_m; do
  path=$(model $m)
  $B run --model $path --ids 2,10,20 --max-tokens 20 > /dev/null 2>&1     # caches warm
  for i in 1 2 3; do $B docs/bench-data/run39/39d_ttft_parts.lua $path >> $OUT/39d_parts.txt 2>> $OUT/39d_err.txt; done
done
cat $OUT/39d_parts.txt
