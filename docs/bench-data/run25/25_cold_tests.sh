#!/bin/bash
# Run 25 (session 18): three GEMV kernel tests, each alone with an empty Mesa shader cache and an empty SPIR-V
# cache, so that every kernel variant's LLVM compile (lavapipe, at its first dispatch) is in the time.
# Usage: bash 25_cold_tests.sh BUILD_DIR TAG   (run from the repository root; lines "TAG test rc=.. S s")
# As run, on the development machine (2 cores), nothing else running, one after the other: first the working
# tree that became e086e45 (TAG new; it differed only in the wording of two summary lines), then f1134d0's
# tests built in a worktree (TAG base; the shaders and the engine are the same in both).
set -u
build=$1 tag=$2
export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json VK_LAYER_PATH=/usr/share/vulkan/explicit_layer.d
export DOPPLER_FIXTURES=$PWD/tests/fixtures DOPPLER_HOME=$PWD DOPPLER_VALIDATION=1
for t in test_k_quant test_k_matmul test_k_fused_gemv; do
  mesa=$(mktemp -d) spv=$(mktemp -d)
  start=$(date +%s.%N)
  MESA_SHADER_CACHE_DIR=$mesa DOPPLER_CACHE_DIR=$spv "$build/$t" > "/tmp/cold_${tag}_$t.txt" 2>&1; rc=$?
  end=$(date +%s.%N)
  echo "$tag $t rc=$rc $(echo "$end - $start" | bc) s"
  rm -rf "$mesa" "$spv"
done
