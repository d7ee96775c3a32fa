#!/bin/bash
# Run 39c (session 32): plan compile per process, A (.abX: the Lua of 223e1a4, this session's first commit: a
# submit per weight preparation, the fusion walks on sets, the step's plan compiled before the loop's) against B
# (the working tree), same binary; `doppler run`'s report alternating A and B, compile.lua for B; every fixture
# model's plans compared between A and B (39c_plansig.lua); then the tests the session's changes touch.
# On the lent GPU machine: bash docs/bench-data/run39/39c_compile_ab.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/39c_gpu.txt 2>&1
IDS=2,10,20,30,40,50,60,70
for m in gemma-q4_k_m llama-q4_k_m gemma; do
  path=$(model $m)
  DOPPLER_HOME=$PWD/.abX $B run --model $path --ids $IDS --max-tokens 16 > /dev/null 2>&1   # caches warm, both trees
  $B run --model $path --ids $IDS --max-tokens 16 > /dev/null 2>&1
  for round in 1 2 3; do
    for ab in A B; do
      home=$PWD; [ $ab = A ] && home=$PWD/.abX
      echo "== $m $ab round $round" >> $OUT/39c_run.txt
      DOPPLER_HOME=$home $B run --model $path --ids $IDS --max-tokens 128 > /dev/null 2>> $OUT/39c_run.txt
    done
    $B recipes/bench/compile.lua --model $path --runs 1 --label "$m B $round" >> $OUT/39c_compile.jsonl 2>> $OUT/39c_err.txt
  done
done
DOPPLER_HOME=$PWD/.abX $B docs/bench-data/run39/39c_plansig.lua > /tmp/sig_a.txt 2>&1
$B docs/bench-data/run39/39c_plansig.lua > /tmp/sig_b.txt 2>&1
{ wc -l /tmp/sig_a.txt /tmp/sig_b.txt; grep -c ERR /tmp/sig_b.txt; cmp /tmp/sig_a.txt /tmp/sig_b.txt && echo "plans: IDENTICAL"; awk '{print $1, $2, $3, $4}' /tmp/sig_b.txt; } > $OUT/39c_sig.txt 2>&1
for t in gguf_fixtures gpu_loop bench fuse_attn lm_head_fusion norm_gate_up glu_down fusion_plugin gemma3_fixtures families_fixtures warmup; do
  echo "== test_$t" >> $OUT/39c_tests.txt
  timeout 300 $B tests/lua/test_$t.lua >> $OUT/39c_tests.txt 2>&1; tail -1 $OUT/39c_tests.txt
done
{ echo '== test_chat.sh'; timeout 300 bash tests/e2e/test_chat.sh && echo 'test_chat.sh passed'; } >> $OUT/39c_tests.txt 2>&1; tail -1 $OUT/39c_tests.txt
grep IDENTICAL $OUT/39c_sig.txt; grep -E "^==|time to first" $OUT/39c_run.txt
