#!/usr/bin/env bash
# Run 31a (session 24), nvidia-h100-x1: attention_decode with wide workgroups and long chunks (few or no
# chunks to merge at short contexts: attention_wg 512 / 1024 with attention_min_chunk and attention_unroll),
# and the quantised LM head's workgroup count (lm_head_groups), on Gemma 3 1B and Llama 3.2 1B Q4_K_M;
# two rounds, p50s; then profiles of the baseline and of the best-looking settings.
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
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
    >>"$OUT/31a_decode.jsonl" 2>>"$OUT/31a_err.txt"
}
GQ=/tmp/g1b-q4_k_m.gguf LQ=/tmp/l1b-q4_k_m.gguf
for round in 1 2; do
  for m in $GQ $LQ; do
    dec base $m --runs 2 --no-profile
    dec a1024-m128-u4 $m --runs 2 --no-profile --hint attention_wg=1024 --hint attention_min_chunk=128 --hint attention_unroll=4
    dec a1024-m64-u2 $m --runs 2 --no-profile --hint attention_wg=1024 --hint attention_min_chunk=64 --hint attention_unroll=2
    dec a1024-m32-u1 $m --runs 2 --no-profile --hint attention_wg=1024 --hint attention_min_chunk=32 --hint attention_unroll=1
    dec a512-m64-u4 $m --runs 2 --no-profile --hint attention_wg=512 --hint attention_min_chunk=64 --hint attention_unroll=4
    dec a512-m32-u2 $m --runs 2 --no-profile --hint attention_wg=512 --hint attention_min_chunk=32 --hint attention_unroll=2
    dec a1024-s1-u4 $m --runs 2 --no-profile --hint attention_wg=1024 --hint attention_splits=1 --hint attention_unroll=4
    dec m32 $m --runs 2 --no-profile --hint attention_min_chunk=32
    for g in 924 1056 2048; do dec head$g $m --runs 2 --no-profile --hint lm_head_groups=$g; done
  done
  echo "round $round done $(date +%T)"
done
for m in $GQ $LQ; do
  dec base-profile $m --runs 1 --profile-tokens 64
  dec a1024-m128-u4-profile $m --runs 1 --profile-tokens 64 --hint attention_wg=1024 --hint attention_min_chunk=128 --hint attention_unroll=4
  dec a512-m64-u4-profile $m --runs 1 --profile-tokens 64 --hint attention_wg=512 --hint attention_min_chunk=64 --hint attention_unroll=4
done
python3 - "$OUT/31a_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        if d.get("p50_ms"): p50[key].append(d["p50_ms"])
        k = d.get("gpu_ms_per_kernel") or {}
        if k:
            print(key, "gpu ms/token %.4f" % d["gpu_ms_per_token"])
            for n, v in sorted(k.items(), key=lambda x: -x[1]): print("    %-30s %.4f" % (n, v))
for key, v in p50.items():
    print("%-16s %-24s p50 %s" % (key[0], key[1], " ".join("%.4f" % x for x in v)))
PY
tail -5 "$OUT/31a_err.txt"
echo "done $(date +%T), $(( $(date +%s) - T0 )) s"
