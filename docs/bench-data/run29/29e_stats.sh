#!/usr/bin/env bash
# Run 29e (session 22), nvidia-h100-x1: the driver's register counts of the gemv_q pipelines in 29d's trees
# (29d's grep missed them: the lines name gemv_q without a shape unless DOPPLER_PROFILE_SHAPES=1).
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
  for t in old new late; do
    home=$PWD; [ $t = old ] && home=$PWD/.abA; [ $t = late ] && home=$PWD/.abC
    DOPPLER_KERNEL_STATS=1 DOPPLER_CACHE_DIR=/tmp/dpc-stats-$t DOPPLER_HOME=$home timeout 60 $B recipes/bench/decode.lua \
      --model $m --label $t-stats --prompt-tokens 32 --tokens 16 --runs 1 --no-profile >/dev/null 2>/tmp/stats.txt
    echo "== $t $(basename $m)" >>"$OUT/29e_stats.txt"
    grep "kernel stats: gemv_q" /tmp/stats.txt | grep DP_GLU | sed 's/Binary Size.*//' | sort -u >>"$OUT/29e_stats.txt"
  done
done
cat "$OUT/29e_stats.txt"
