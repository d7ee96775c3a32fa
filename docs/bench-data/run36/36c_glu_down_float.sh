#!/usr/bin/env bash
# Run 36c (session 29), nvidia-h100-x1: 36b again after glu_down_float.comp lost its early and double-buffered loads (registers), the fused MLP on float gate and up (fusion glu_down,
# fused/glu_down_float.comp) against --hint glu_down=off, and its geometry (rows / invocations), three rounds of 2
# runs, Gemma 3 1B F16 and Llama 3.2 1B F16; profiles; then the H100 tests that run it.
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
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
echo "models ready $(( $(date +%s) - T0 )) s"
dec() {  # label model args...
  local label=$1 m=$2; shift 2
  timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 "$@" >>"$OUT/36c_decode.jsonl" 2>>"$OUT/36c_err.txt"
}
for round in 1 2 3; do
  for m in $G $L; do
    dec off $m --runs 2 --no-profile --hint glu_down=off
    dec on $m --runs 2 --no-profile
    dec 16x256 $m --runs 2 --no-profile --hint glu_down_rows=16 --hint glu_down_wg=256
    dec 64x512 $m --runs 2 --no-profile --hint glu_down_rows=64 --hint glu_down_wg=512
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
python3 - "$OUT/36c_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list); tok = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        p50[key].append(d["p50_ms"]); tok[key].append(d["decode_tok_s"])
for key in p50:
    print("%-8s %-6s p50 %s  tok/s %s" % (key[0], key[1], " ".join("%.4f" % x for x in p50[key]), " ".join("%.1f" % x for x in tok[key])))
PY
for m in $G $L; do
  dec off-profile $m --runs 1 --profile-tokens 16 --hint glu_down=off
  dec on-profile $m --runs 1 --profile-tokens 16
done
python3 - "$OUT/36c_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if d["gpu_ms_per_kernel"]:
        print(d["model"].split("/")[-1][:14], d["label"], {k: round(v, 4) for k, v in sorted(d["gpu_ms_per_kernel"].items(), key=lambda x: -x[1])[:7]})
PY
echo "decode done $(( $(date +%s) - T0 )) s"
# the driver's statistics of the fused MLP's pipelines (registers), from a short decode of each model
for m in $G $L; do
  DOPPLER_KERNEL_STATS=1 DOPPLER_CACHE_DIR=/tmp/dpc-stats timeout 60 $B run --model $m --ids 2,3,4 --max-tokens 4 --quiet \
    2>&1 | grep -A12 "glu_down_float" | head -14 >>"$OUT/36c_err.txt"
done
for t in glu_down; do
  timeout 200 $B tests/lua/test_$t.lua >"$OUT/36c_h100_t_$t.txt" 2>&1; echo "$t: $(tail -1 "$OUT/36c_h100_t_$t.txt")"
done
echo "done $(( $(date +%s) - T0 )) s"
