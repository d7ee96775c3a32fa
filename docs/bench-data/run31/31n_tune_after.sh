#!/usr/bin/env bash
# Run 31n (session 24), nvidia-h100-x1: at 52adc9b (the loop on conditional rendering, linears at one row,
# the launcher's stack check): test_hints; `doppler tune --wall` (every knob by wall clock) on both Q4_K_M
# models, and decode with its picks against the defaults, two rounds.
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 200 $B tests/lua/test_hints.lua >"$OUT/31n_h100_test_hints.txt" 2>&1; echo "test_hints: $(tail -1 "$OUT/31n_h100_test_hints.txt")"
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(date +%T)"
OUT=$OUT TAG=31n MODELS="/tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf" TUNE_S=200 bash docs/bench-data/run31/31h_tune_wall.sh 2>&1 | grep -v '^models ready'
echo "done $(date +%T), $(( $(date +%s) - T0 )) s"
