#!/usr/bin/env bash
# Run 31c (session 24), nvidia-h100-x1: (1) the quantised LM head's workgroup count (lm_head_groups) around
# 31a/31b's best for Gemma 3 1B Q4_K_M, with the side prefetcher on (default) and off; (2) Llama's norm before
# q/k/v folded into gemv_multi (.abG: norm_qkv taking add_rmsnorm, gemv_multi DP_PRENORM=1; session 22's 29g
# measured it without the one-wave rows) with and without gemv_rows=4 (768 workgroups for q/k/v: one wave),
# on Llama 3.2 1B Q4_K_M and F16; two rounds; profiles.
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
dec() {  # label home model args...
  local label=$1 home=$2 m=$3; shift 3
  DOPPLER_HOME=$home timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 "$@" >>"$OUT/31c_decode.jsonl" 2>>"$OUT/31c_err.txt"
}
GQ=/tmp/g1b-q4_k_m.gguf LQ=/tmp/l1b-q4_k_m.gguf
for round in 1 2; do
  dec base $PWD $GQ --runs 2 --no-profile
  for n in 768 832 896 924 960; do dec head$n $PWD $GQ --runs 2 --no-profile --hint lm_head_groups=$n; done
  dec pfoff $PWD $GQ --runs 2 --no-profile --hint side_prefetch=off
  dec pfoff-head924 $PWD $GQ --runs 2 --no-profile --hint side_prefetch=off --hint lm_head_groups=924
  for m in $LQ $L; do
    dec base $PWD $m --runs 2 --no-profile
    dec qkv1 $PWD/.abG $m --runs 2 --no-profile
    dec qkv1-rows4 $PWD/.abG $m --runs 2 --no-profile --hint gemv_rows=4
    dec rows4 $PWD $m --runs 2 --no-profile --hint gemv_rows=4
  done
  dec head528 $PWD $LQ --runs 2 --no-profile --hint lm_head_groups=528
  dec head896 $PWD $LQ --runs 2 --no-profile --hint lm_head_groups=896
  echo "round $round done $(date +%T)"
done
dec base-profile $PWD $GQ --runs 1 --profile-tokens 64
dec head924-profile $PWD $GQ --runs 1 --profile-tokens 64 --hint lm_head_groups=924
dec pfoff-profile $PWD $GQ --runs 1 --profile-tokens 64 --hint side_prefetch=off
dec base-profile $PWD $LQ --runs 1 --profile-tokens 64
dec qkv1-profile $PWD/.abG $LQ --runs 1 --profile-tokens 64
dec qkv1-rows4-profile $PWD/.abG $LQ --runs 1 --profile-tokens 64 --hint gemv_rows=4
python3 - "$OUT/31c_decode.jsonl" <<'PY'
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
    print("%-16s %-22s p50 %s" % (key[0], key[1], " ".join("%.4f" % x for x in v)))
PY
tail -4 "$OUT/31c_err.txt"
echo "done $(date +%T), $(( $(date +%s) - T0 )) s"
