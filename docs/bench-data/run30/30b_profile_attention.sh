#!/usr/bin/env bash
# Run 30b (session 23), nvidia-h100-x1: the decode profile per kernel and shape at bde8d67 (Gemma 3 1B and
# Llama 3.2 1B, Q4_K_M), and attention_decode's hints swept around their auto values.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(date +%T)"
dec() {  # label model args...
  local label=$1 m=$2; shift 2
  timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 --tokens 128 "$@" \
    >>"$OUT/30b_decode.jsonl" 2>>"$OUT/30b_err.txt"
}
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
  DOPPLER_PROFILE_SHAPES=1 dec profile $m --runs 1 --profile-tokens 64
  dec auto $m --runs 2 --no-profile
  for s in 4 8 16 32 64; do dec splits$s $m --runs 2 --no-profile --hint attention_splits=$s; done
  for w in 64 256 512; do dec wg$w $m --runs 2 --no-profile --hint attention_wg=$w; done
  for u in 2 4; do dec unroll$u $m --runs 2 --no-profile --hint attention_unroll=$u; done
  dec heads2 $m --runs 2 --no-profile --hint attention_heads=2
  dec heads4 $m --runs 2 --no-profile --hint attention_heads=4
  dec auto-again $m --runs 2 --no-profile
done
python3 - "$OUT/30b_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["model"].split("/")[-1][:16], "%-10s" % d["label"], "decode %.1f p50 %.4f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0))
        k = d.get("gpu_ms_per_kernel") or {}
        for n, v in sorted(k.items(), key=lambda x: -x[1]): print("    %-40s %.4f" % (n, v))
PY
tail -5 "$OUT/30b_err.txt"
