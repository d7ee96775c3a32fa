#!/bin/bash
# Run 25 (session 18): the normal stage's ctest (-j2) with lavapipe's thread pool at its default (one worker
# per core) and at LP_NUM_THREADS=1, alternating, on one Mesa cache. Mesa puts its cache in a
# mesa_shader_cache directory under MESA_SHADER_CACHE_DIR, so as run (CACHE=/tmp/xdg7/mesa_shader_cache, which
# held the fresh-clone run's cache one level up) the first run compiled every variant (cold) and the later
# ones found them (warm). The script was stopped during its fourth run.
# Usage: bash 25_lp_threads.sh BUILD_DIR CACHE
export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json VK_LAYER_PATH=/usr/share/vulkan/explicit_layer.d
export MESA_SHADER_CACHE_DIR=$2
cd "$1" || exit 2
for v in default 1 default 1; do
  if [ $v = default ]; then unset LP_NUM_THREADS; else export LP_NUM_THREADS=$v; fi
  echo "== LP_NUM_THREADS=$v $(date -u +%H:%M:%S)"
  { time ctest -j2 > /tmp/lpt_$v.log 2>&1; } 2>&1 | tr '\n' ' '; echo
  grep -E "tests passed|Total Test" /tmp/lpt_$v.log
done
