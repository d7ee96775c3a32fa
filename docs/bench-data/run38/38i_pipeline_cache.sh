#!/usr/bin/env bash
# Run 38i (session 31), nvidia-h100-x1: the pipeline cache file (gpu/pipeline_cache.c, uncommitted when run; the
# tree as committed next). `old`: its file removed before each process (an empty VkPipelineCache: what the
# driver did before, with its own disk cache), `new`: the file the previous process left. A first process fills
# the caches, then two processes of each time the session's plans (38e_plan_time.lua: round 1 makes the
# kernels), and `doppler run` reports its compile times; alternating old / new.
set -u
. scripts/device/env.sh
Q=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
IDS=2,651,6974,573,235,6523,603,3868
for m in $Q $LQ; do n=$(basename $m .gguf)
  C=/tmp/pc-$n
  DOPPLER_CACHE_DIR=$C timeout 120 $B docs/bench-data/run38/38e_plan_time.lua $m >/dev/null 2>&1
  for r in 1 2; do for v in old new; do
    echo "== $n $v $r" >> $OUT/38i_plan_time.txt
    [ $v = old ] && rm -f $C/pipelines-*.bin
    DOPPLER_CACHE_DIR=$C timeout 120 $B docs/bench-data/run38/38e_plan_time.lua $m 2>&1 | head -2 >> $OUT/38i_plan_time.txt
    [ $v = old ] && rm -f $C/pipelines-*.bin
    DOPPLER_CACHE_DIR=$C timeout 60 $B run --model $m --ids $IDS --max-tokens 128 2>&1 >/dev/null | tail -1 >> $OUT/38i_plan_time.txt
  done; done
  ls -la $C/pipelines-* >> $OUT/38i_plan_time.txt
done
cat $OUT/38i_plan_time.txt
