#!/bin/bash
# Run 39a (session 32): where plan compile time goes (recipes/bench/compile.lua), per model, in three
# processes each: the first with empty SPIR-V and pipeline caches (a first run after install), the next two
# with them filled (every later process). On the lent GPU machine: bash docs/bench-data/run39/39a_compile.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/39a_gpu.txt 2>&1
for m in gemma-q4_k_m llama-q4_k_m gemma; do
  path=$(model $m)
  rm -rf $DOPPLER_CACHE_DIR
  for proc in 1 2 3; do
    $B recipes/bench/compile.lua --model $path --runs 2 --label "$m process $proc" >> $OUT/39a_compile.jsonl 2>> $OUT/39a_err.txt
  done
done
$B run --model $(model gemma-q4_k_m) --ids 2,10,20,30,40,50,60,70 --max-tokens 128 > /dev/null 2> $OUT/39a_run.txt
python3 - <<PY > $OUT/39a_summary.txt
import json
for l in open('/39a_compile.jsonl'):
    r = json.loads(l)
    print("%-26s run %d %-6s %7.1f ms  fusions %5.1f place %5.1f lower %6.1f loop %5.1f | built %2d lookups %3d: lookup %5.2f shader %6.1f reflect %5.2f layout %5.2f pipeline %6.1f ms  dispatches %d" % (
        r['label'], r['run'], r['plan'], 1e3*r['seconds'], 1e3*r['fusions_s'], 1e3*r['place_s'], 1e3*r['lower_s'], 1e3*r['loop_s'],
        r['kernels_built'], r['kernel_lookups'], 1e3*r['kernel_lookup_s'], 1e3*r['kernel_shader_s'], 1e3*r['kernel_reflect_s'],
        1e3*r['kernel_layout_s'], 1e3*r['kernel_pipeline_s'], r['dispatches']))
PY
cat $OUT/39a_summary.txt
