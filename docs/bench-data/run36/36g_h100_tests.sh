#!/usr/bin/env bash
# Run 36g (session 29), nvidia-h100-x1, at 850db3a (the session's last code: 6db46e8): the H100 tests that run the
# committed fused/glu_down_float.comp (test_glu_down, test_gpu_loop with glu_down=on) and gemv_multi with its
# prenorm helpers moved to dp_prenorm.glsl (test_norm_gate_up, test_fuse_attn, test_gemma3_fixtures).
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for t in glu_down gpu_loop norm_gate_up fuse_attn gemma3_fixtures; do
  timeout 200 $B tests/lua/test_$t.lua >>"$OUT/36g_h100_tests.txt" 2>&1
  echo "$t: $(tail -1 "$OUT/36g_h100_tests.txt") ($(( $(date +%s) - T0 )) s)" | tee -a "$OUT/36g_summary.txt"
done
