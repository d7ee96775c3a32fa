# scripts/device/env.sh: sourced (`. scripts/device/env.sh`) from the repository root by the scripts that run on
# the lent GPU machine (h100-bench.sh, docs/bench-data/run*/ from run 38 on), which has no Vulkan loader and no
# network: it unpacks the loader debs carried in .gl/, points the loader at the NVIDIA driver, and sets doppler's
# environment for the static build-h100/doppler. Defines B (the binary), OUT (results, default /tmp/out), G, L
# and Q (the synthetic models' directories) and `model`.
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b Q=/tmp/q06b

# model NAME: prints the path of a synthetic model at a released architecture's shapes, made the first time it is
# asked for (~100-200 s on a fresh machine): gemma (Gemma 3 1B, F16 directory, $G), llama (Llama 3.2 1B, $L),
# qwen (Qwen3 0.6B, head_dim 128, $Q), and gemma-QUANT / llama-QUANT / qwen-QUANT, their `doppler convert
# --quant QUANT` GGUFs (QUANT: q4_k_m, q8_0, ...; the conversion's time goes to $OUT/convert.txt).
model() {
  local fam=${1%%-*} q=
  [ "$1" != "$fam" ] && q=${1#*-}
  local dir cfg tok
  case $fam in
    gemma) dir=$G cfg=gemma-3-1b-it tok=gemma3 ;;
    llama) dir=$L cfg=llama-3.2-1b-instruct tok=llama3 ;;
    qwen) dir=$Q cfg=qwen3-0.6b tok=qwen3 ;;
    *) echo "model: no synthetic model '$1' (gemma, llama, qwen, gemma-QUANT, llama-QUANT, qwen-QUANT)" >&2; return 1 ;;
  esac
  [ -d $dir ] || timeout 200 $B synth --config models/configs/$cfg.config.json \
    --tokenizer tests/fixtures/tokenizers/$tok.tokenizer.json.gz --out $dir --dtype f16 >/dev/null 2>&1
  if [ -z "$q" ]; then echo $dir; return 0; fi
  local out=$dir-$q.gguf
  [ -f $out ] || { time timeout 300 $B convert $dir --quant $q --out $out --no-manifest --quiet >/dev/null; } 2>>"$OUT/convert.txt"
  echo $out
}
