#!/bin/bash
# Run 39b (session 32): weight preparations in one submit per plan (B, the working tree) against one submit per
# weight (A, .abX: the Lua of the commit before, `git archive HEAD lua recipes shaders models`), same binary.
# `doppler run`'s report and recipes/bench/compile.lua, alternating A and B, caches warm; then the tests the
# change touches. On the lent GPU machine: bash docs/bench-data/run39/39b_prep_batch.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/39b_gpu.txt 2>&1
IDS=2,10,20,30,40,50,60,70
for m in gemma-q4_k_m llama-q4_k_m; do
  path=$(model $m)
  $B run --model $path --ids $IDS --max-tokens 16 > /dev/null 2>&1          # caches warm
  for round in 1 2 3; do
    for ab in A B; do
      home=$PWD; [ $ab = A ] && home=$PWD/.abX
      echo "== $m $ab round $round" >> $OUT/39b_run.txt
      DOPPLER_HOME=$home $B run --model $path --ids $IDS --max-tokens 128 > /dev/null 2>> $OUT/39b_run.txt
      DOPPLER_HOME=$home $B $home/recipes/bench/compile.lua --model $path --runs 1 --label "$m $ab $round" >> $OUT/39b_compile.jsonl 2>> $OUT/39b_err.txt
    done
  done
done
for t in gguf_fixtures gpu_loop bench; do
  timeout 300 $B tests/lua/test_$t.lua > $OUT/39b_h100_t_$t.txt 2>&1; tail -1 $OUT/39b_h100_t_$t.txt
done
grep -E "^==|time to first" $OUT/39b_run.txt
