#!/usr/bin/env bash
# Run 31b (session 24), nvidia-h100-x1: where gemv_q's int8-activation gate+up spends its time. gemv.lua at
# Gemma 3 1B's (glu 6912 x 1152, Q5_0 as doppler convert --quant q4_k_m stores it) and Llama 3.2 1B's (glu
# 8192 x 2048, Q4_K) gate+up shapes, q8x2, in the trees of 31b_make_variants.py (.abB no staging, .abC no dot
# products, .abD neither: timing only; .abF Q5_0's fifth bits by one multiply: exact), with the float and Q8_0
# forms for reference; then decode on the two Q4_K_M models: lm_head_groups swept finely, and .abF against
# the tree, two rounds.
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b
( [ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(date +%T)" ) &
g() {  # label home args...
  local label=$1 home=$2; shift 2
  DOPPLER_HOME=$home timeout 150 $B recipes/bench/gemv.lua --hint q_layout=flat --hint q_matmul=fused --iters 100 \
    --label "$label" "$@" >>"$OUT/31b_gemv.jsonl" 2>>"$OUT/31b_err.txt"
}
for round in 1 2; do
  for v in A B C D F; do
    h=$PWD; [ $v = A ] || h=$PWD/.ab$v
    g gemma-$v $h --hint gemv_q_x=q8x2 --tol 1e30 --shape glu:6912,1152 --dtype q5_0
    g llama-$v $h --hint gemv_q_x=q8x2 --tol 1e30 --shape glu:8192,2048 --dtype q4_k
  done
done
g gemma-ref $PWD --shape glu:6912,1152 --dtype f16,q8_0
g llama-ref $PWD --shape glu:8192,2048 --dtype f16,q8_0
echo "gemv done $(date +%T)"
wait
dec() {  # label home model args...
  local label=$1 home=$2 m=$3; shift 3
  DOPPLER_HOME=$home timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 --runs 2 --no-profile "$@" >>"$OUT/31b_decode.jsonl" 2>>"$OUT/31b_err.txt"
}
GQ=/tmp/g1b-q4_k_m.gguf LQ=/tmp/l1b-q4_k_m.gguf
for round in 1 2; do
  for m in $GQ $LQ; do
    dec base $PWD $m
    dec q5mul $PWD/.abF $m
    for n in 396 528 660 792 924 1056 1188; do dec head$n $PWD $m --hint lm_head_groups=$n; done
  done
done
python3 - "$OUT/31b_gemv.jsonl" "$OUT/31b_decode.jsonl" <<'PY'
import json, sys, collections
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print("%-10s %-5s %6d %6d wg=%s rows=%s %8s us %7s GB/s check %.2g" % (d["label"], d["dtype"], d["N"], d["K"],
              d.get("wg"), d.get("rows"), "%.2f" % d["us_per_call"] if d.get("us_per_call") else "-",
              "%.0f" % d["gb_s"] if d.get("gb_s") else "-", d.get("check", -1)))
p50 = collections.defaultdict(list)
for l in open(sys.argv[2]):
    if l.startswith("{"):
        d = json.loads(l)
        if d.get("p50_ms"): p50[(d["model"].split("/")[-1][:14], d["label"])].append(d["p50_ms"])
for key, v in p50.items():
    print("%-16s %-10s p50 %s" % (key[0], key[1], " ".join("%.4f" % x for x in v)))
PY
tail -4 "$OUT/31b_err.txt"
echo "done $(date +%T), $(( $(date +%s) - T0 )) s"
