#!/usr/bin/env bash
# Run 34h (session 27), nvidia-h100-x1: test_glu_down on the H100 after h is rounded to f16 by integer operations
# in the fused MLP (the driver had dropped the f32 -> f16 -> f32 round trip), and one round of decode, glu_down
# off against auto, on the models left in /tmp by 34g (made again if the machine is fresh).
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for t in glu_down gguf_fixtures; do
  timeout 150 $B tests/lua/test_$t.lua >"$OUT/34h_h100_t_$t.txt" 2>&1; echo "test_$t: $(tail -1 "$OUT/34h_h100_t_$t.txt")"
done
grep "slope\|worst" "$OUT/34h_h100_t_glu_down.txt"
if [ -f /tmp/g1b-q4_k_m.gguf ] && [ -f /tmp/l1b-q4_k_m.gguf ]; then
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    for h in off auto; do
      timeout 90 $B recipes/bench/decode.lua --model $m --label $h --prompt-tokens 32 --tokens 128 --runs 2 --no-profile \
        --hint glu_down=$h >>"$OUT/34h_decode.jsonl" 2>>"$OUT/34h_err.txt"
    done
  done
  python3 -c "
import json
for l in open('$OUT/34h_decode.jsonl'):
    d = json.loads(l); print(d['model'].split('/')[-1], d['label'], '%.4f' % d['p50_ms'], '%.1f' % d['decode_tok_s'])"
fi
echo "done $(( $(date +%s) - T0 )) s"
