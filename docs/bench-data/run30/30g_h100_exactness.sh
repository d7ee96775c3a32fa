#!/usr/bin/env bash
# Run 30g (session 23), nvidia-h100-x1: 30f's two H100 failures (test_embed_norm's f16 cases: h one f16 ulp off;
# test_lm_head_fusion's lm_head_pre case with f32 activations: a logit a few f32 ulps off), rerun with
# lm_head_common.glsl's pre-sum marked precise (no fma contraction), and in .abB also embed_norm's sum of
# squares marked precise.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for home in $PWD $PWD/.abB; do
  for t in embed_norm lm_head_fusion; do
    DOPPLER_HOME=$home timeout 200 $B tests/lua/test_$t.lua >/tmp/t.txt 2>&1
    echo "$(basename $home) test_$t: $(tail -1 /tmp/t.txt)"; grep -A1 FAILED /tmp/t.txt | head -12
    { echo "== $home test_$t"; cat /tmp/t.txt; } >>"$OUT/30g_h100_tests.txt"
  done
done
