#!/usr/bin/env bash
# Run 31m (session 24), nvidia-h100-x1: test_tune and test_bench at c7df7a0 (31k's two failures, fixed in the
# tests), and test_gpu_loop and test_kernels again.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for t in tune bench gpu_loop kernels; do
  timeout 200 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/31m_h100_tests.txt"
done
