#!/bin/bash
# The normal and the sanitizer stage's ctest (-j2), the tree before this session (79f0317, a worktree
# in $OLD) against this session's (in $NEW), one after the other, Mesa's shader cache warm (as the
# sanitizer stage always finds it after the normal stage). SPIR-V caches: each normal build's holds
# every variant (the old one a copy of the new one's: no shader changed); the old sanitizer build's is
# empty, as on a fresh clone; the new sanitizer build reads the normal build's (DOPPLER_TEST_SPIRV_CACHE).
OLD=${OLD:-/tmp/ab_old} NEW=${NEW:-/work/main}
export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json VK_LAYER_PATH=/usr/share/vulkan/explicit_layer.d
for run in "$OLD/build" "$NEW/build" "$OLD/build-asan" "$NEW/build-asan"; do
  echo "== $run $(date +%T)"
  (cd "$run" && /usr/bin/time -f "real %e user %U sys %S" ctest -j2 2>&1 | grep -E "tests passed|Total Test time|real |Failed|\*\*\*")
done
