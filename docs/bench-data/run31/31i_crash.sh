#!/usr/bin/env bash
# Run 31i (session 24), nvidia-h100-x1: 31h's decode with the hints `doppler tune --wall` picked crashed
# (segmentation fault) on both Q4_K_M models. Which hint: decode.lua with each subset, then cuda-gdb's backtrace.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
M=/tmp/g1b-q4_k_m.gguf
t() {  # label args...
  local label=$1; shift
  timeout 60 $B recipes/bench/decode.lua --model $M --label "$label" --prompt-tokens 32 --tokens 128 --runs 2 --no-profile "$@" \
    >>"$OUT/31i_decode.jsonl" 2>/tmp/e.txt
  echo "$label rc=$? $(tail -c 300 /tmp/e.txt | tr '\n' ' ')"
}
t chunk1 --hint decode_chunk=1
t chunk1-pfoff --hint decode_chunk=1 --hint side_prefetch=off
t chunk1-runs1 --hint decode_chunk=1 --runs 1
t splits32 --hint attention_splits=32
t dequant --hint q_matmul=dequant_f16 --hint q_matmul_glu=fused --hint q_matmul_head=fused
t chunk1-prof --hint decode_chunk=1 --profile-tokens 16
t chunk1-tok16 --hint decode_chunk=1 --tokens 16
echo "== backtrace"
cuda-gdb -batch -ex run -ex bt --args $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 \
  --no-profile --hint decode_chunk=1 2>&1 | grep -v '^\[New Thread\|^\[Thread' | tail -40
