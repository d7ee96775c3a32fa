#!/bin/bash
# warm normal stage at -j2, -j3, -j2 (validation on), timing each
cd /work/main/build
export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json VK_LAYER_PATH=/usr/share/vulkan/explicit_layer.d
for j in 3 2 4; do
  echo "== -j$j $(date +%T)"
  /usr/bin/time -f "real %e user %U sys %S" ctest -j$j 2>&1 | grep -E "tests passed|Total Test time|real "
done
