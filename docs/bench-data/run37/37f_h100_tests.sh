#!/usr/bin/env bash
# Run 37f (session 30), nvidia-h100-x1, at 1a91942 (doppler tune's decode loops made one; no kernel changed this
# session): test_tune and test_bench on the H100, where tune scores its wall-clock knobs (side queue present).
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for t in tune bench; do
  timeout 250 $B tests/lua/test_$t.lua >>"$OUT/37f_h100_tests.txt" 2>&1
  echo "$t: $(tail -1 "$OUT/37f_h100_tests.txt") ($(( $(date +%s) - T0 )) s)" | tee -a "$OUT/37f_summary.txt"
done
