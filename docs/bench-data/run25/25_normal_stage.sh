#!/bin/bash
# Run 25 (session 18): the normal stage's ctest (-j2, validation layer on, as scripts/test.sh runs it) on an
# empty Mesa shader cache and an empty SPIR-V cache, under `time` (wall, and the CPU time of every test).
# Usage: bash 25_normal_stage.sh BUILD_DIR TAG  (BUILD_DIR configured and built as scripts/test.sh does)
set -u
build=$1 tag=$2
export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json VK_LAYER_PATH=/usr/share/vulkan/explicit_layer.d
mesa=$(mktemp -d)
rm -rf "$build/spirv-cache"
cd "$build" || exit 2
echo "== $tag $(git log --oneline -1 | cut -c1-7) $(date -u +%H:%M:%S)"
{ time MESA_SHADER_CACHE_DIR=$mesa ctest -j2 > "/tmp/normal_$tag.log" 2>&1; } 2>&1
grep -E "tests passed|Total Test time" "/tmp/normal_$tag.log"
rm -rf "$mesa"
