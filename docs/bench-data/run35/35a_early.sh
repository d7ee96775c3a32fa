#!/usr/bin/env bash
# Run 35a (session 28), nvidia-h100-x1: the fused MLP's columns of down requested at the kernel's start (hint
# glu_down_early: off = session 27's kernel, 2, all = the new default), with gemv_q_unroll 2 / 4 (gate+up's units
# in flight) and, for Llama, 64 rows; three rounds of 2 runs, Gemma 3 1B and Llama 3.2 1B Q4_K_M; profiles;
# then test_glu_down on the H100.
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(( $(date +%s) - T0 )) s"
dec() {  # label model args...
  local label=$1 m=$2; shift 2
  timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 "$@" >>"$OUT/35a_decode.jsonl" 2>>"$OUT/35a_err.txt"
}
for round in 1 2 3; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    dec early-off $m --runs 2 --no-profile --hint glu_down_early=off
    dec early-all $m --runs 2 --no-profile
    dec early-2 $m --runs 2 --no-profile --hint glu_down_early=2
    dec all-un2 $m --runs 2 --no-profile --hint gemv_q_unroll=2
    dec all-un4 $m --runs 2 --no-profile --hint gemv_q_unroll=4
    dec off-un2 $m --runs 2 --no-profile --hint glu_down_early=off --hint gemv_q_unroll=2
  done
  dec all-rows64 /tmp/l1b-q4_k_m.gguf --runs 2 --no-profile --hint glu_down_rows=64
  dec off-rows64 /tmp/l1b-q4_k_m.gguf --runs 2 --no-profile --hint glu_down_rows=64 --hint glu_down_early=off
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
python3 - "$OUT/35a_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list); tok = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        p50[key].append(d["p50_ms"]); tok[key].append(d["decode_tok_s"])
for key in p50:
    print("%-16s %-12s p50 %s  tok/s %s" % (key[0], key[1], " ".join("%.4f" % x for x in p50[key]), " ".join("%.1f" % x for x in tok[key])))
PY
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
  dec off-profile $m --runs 1 --profile-tokens 16 --hint glu_down_early=off
  dec all-profile $m --runs 1 --profile-tokens 16
done
python3 - "$OUT/35a_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if d["gpu_ms_per_kernel"]:
        print(d["model"].split("/")[-1][:14], d["label"], {k: round(v, 4) for k, v in sorted(d["gpu_ms_per_kernel"].items(), key=lambda x: -x[1])[:7]})
PY
echo "decode done $(( $(date +%s) - T0 )) s"
timeout 120 $B tests/lua/test_glu_down.lua >"$OUT/35a_h100_t_glu_down.txt" 2>&1; tail -3 "$OUT/35a_h100_t_glu_down.txt"
echo "done $(( $(date +%s) - T0 )) s"
