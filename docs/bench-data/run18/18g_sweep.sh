#!/usr/bin/env bash
# 18g: the fused path's quantised LM head (int8 x) under other rows / workgroup / group-count hints: a hint
# sweep of recipes/bench/decode.lua with profiles (GPU ms per shape), at 5b38038.
set -u
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export DOPPLER_CACHE_DIR=/tmp/dpc B=$PWD/build-h100/doppler DOPPLER_BIN=$PWD/build-h100/doppler
[ -f /usr/lib/x86_64-linux-gnu/libvulkan.so.1 ] || { for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; }
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
G=/tmp/g1b L=/tmp/l1b Q=/tmp/g1b-q4_k_m.gguf LQ=/tmp/l1b-q4_k_m.gguf
[ -d $G ] || $B synth --config models/configs/gemma-3-1b-it.config.json --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f $Q ] || $B convert $G --quant q4_k_m --out $Q --no-manifest --quiet
[ -d $L ] || $B synth --config models/configs/llama-3.2-1b-instruct.config.json --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f $LQ ] || $B convert $L --quant q4_k_m --out $LQ --no-manifest --quiet
J=$OUT/18g_head_hints.jsonl
run() { local lab=$1 m=$2; shift 2
  local hs=""; for h in "$@"; do hs="$hs --hint $h"; done
  DOPPLER_PROFILE_SHAPES=1 timeout 120 $B recipes/bench/decode.lua --model $m --prompt-tokens 32 --tokens 128 $hs --runs 1 --profile-tokens 16 --label $lab >> $J 2>>$OUT/err.txt; }
for m in $LQ $Q; do n=$(basename $m .gguf)
  run $n-warm $m q_matmul=fused
  run $n-default $m q_matmul=fused
  run $n-lmg512 $m q_matmul=fused lm_head_groups=512
  run $n-lmg4096 $m q_matmul=fused lm_head_groups=4096
  run $n-rows8 $m q_matmul=fused gemv_q_rows=8
  run $n-rows2 $m q_matmul=fused gemv_q_rows=2
  run $n-wg256 $m q_matmul=fused gemv_q_wg=256
  run $n-wg64 $m q_matmul=fused gemv_q_wg=64
done
python3 - $J <<'PY'
import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d=json.loads(l); k=d.get("gpu_ms_per_kernel") or {}
        s=" ".join("%s=%.3f"%(a,b) for a,b in sorted(k.items()) if b>0.02)
        print(d["label"], "decode %.1f"%(d["decode_tok_s"] or 0), "gpu/tok", d.get("gpu_ms_per_token"), s)
PY
tail -3 $OUT/err.txt
