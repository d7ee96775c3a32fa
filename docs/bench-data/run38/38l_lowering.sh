#!/usr/bin/env bash
# Run 38l (session 31), nvidia-h100-x1: the fusion pass's graph walks as plain loops (0e42a7d) against the Lua of
# 9bfe545 (`git archive 9bfe545 lua shaders recipes models` in .abX/old, run by the same binary through
# DOPPLER_HOME): 38e_plan_time.lua's rounds 2-3 (kernels made: lowering and recording only), two processes each,
# alternating, both Q4_K_M models.
set -u
. scripts/device/env.sh
Q=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
for m in $Q $LQ; do
  $B docs/bench-data/run38/38e_plan_time.lua $m > /dev/null 2>&1
  for r in 1 2; do for v in old new; do
    [ $v = old ] && H=$PWD/.abX/old || H=$PWD
    echo "== $(basename $m) $v $r" >> $OUT/38l_lowering.txt
    DOPPLER_HOME=$H timeout 120 $B docs/bench-data/run38/38e_plan_time.lua $m 2>&1 | tail -2 >> $OUT/38l_lowering.txt
  done; done
done
cat $OUT/38l_lowering.txt
