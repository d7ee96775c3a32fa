#!/usr/bin/env bash
# Run 33a (session 26), nvidia-h100-x1: `restrict` on the read-only buffer references (dp_common.glsl's *In,
# DP_RAW16_In, DqU32x2In), in .abR, against the tree as it is (HEAD), one binary, two rounds on the four models;
# gemv.lua on the decode shapes of both; then the H100 tests that run the decode kernels, with .abR.
# Why: the weights are read through buffer references decorated NonWritable only; with Restrict the driver
# may prove a load read-only for the dispatch and take the non-coherent (read-only cache) path.
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
echo "models ready $(( $(date +%s) - T0 )) s"
dec() {  # label home model args...
  local label=$1 home=$2 m=$3; shift 3
  DOPPLER_HOME=$home timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 "$@" >>"$OUT/33a_decode.jsonl" 2>>"$OUT/33a_err.txt"
}
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf $G $L; do
    dec head $PWD $m --runs 2 --no-profile
    dec restrict $PWD/.abR $m --runs 2 --no-profile
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
  dec head-profile $PWD $m --runs 1 --profile-tokens 16
  dec restrict-profile $PWD/.abR $m --runs 1 --profile-tokens 16
done
python3 - "$OUT/33a_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list); tok = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        p50[key].append(d["p50_ms"]); tok[key].append(d["decode_tok_s"])
        if d["gpu_ms_per_kernel"]:
            print(key, {k: round(v, 4) for k, v in sorted(d["gpu_ms_per_kernel"].items(), key=lambda x: -x[1])[:8]})
for key in p50:
    print("%-16s %-18s p50 %s  tok/s %s" % (key[0], key[1], " ".join("%.4f" % x for x in p50[key]), " ".join("%.1f" % x for x in tok[key])))
PY
echo "decode done $(( $(date +%s) - T0 )) s"
for h in $PWD $PWD/.abR; do
  DOPPLER_HOME=$h timeout 120 $B recipes/bench/gemv.lua --dtype f16,q5_0,q4_k,q6_k,q8_0 --label $(basename $h) \
    --shape glu:6912,1152 --shape 1152,6912 --shape glu:8192,2048 --shape 2048,8192 >>"$OUT/33a_gemv.jsonl" 2>>"$OUT/33a_err.txt"
done
python3 - "$OUT/33a_gemv.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d = json.loads(l)
    print("%-6s %-5s %-5s %5dx%-5d %7.2f us  %7.1f GB/s" % (d.get("label"), d["op"], d.get("dtype"), d["N"], d["K"], d.get("us_per_call", -1), d.get("gb_s", -1)))
PY
echo "gemv done $(( $(date +%s) - T0 )) s"
for t in gguf_fixtures gpu_loop gemma3_fixtures families_fixtures lm_head_fusion; do
  [ $(( $(date +%s) - T0 )) -lt 520 ] || break
  DOPPLER_HOME=$PWD/.abR timeout 120 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t (restrict): $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/33a_h100_tests.txt"
done
tail -3 "$OUT/33a_err.txt"
echo "done $(( $(date +%s) - T0 )) s"
