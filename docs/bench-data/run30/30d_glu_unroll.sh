#!/usr/bin/env bash
# Run 30d (session 23), nvidia-h100-x1: gate+up on int8 activations (gemv_q DP_GLU, q8x2) with more units in
# flight per thread (gemv_q_unroll: the loads of UN units issued before their arithmetic). Sessions 8-12
# measured UN only with float activations (x in registers too); with q8x2, x is in shared memory, so UN adds
# only the weights' registers. gemv.lua per call, then decode (Gemma 3 1B and Llama 3.2 1B, Q4_K_M), where
# only gate+up runs gemv_q.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
g() { timeout 280 $B recipes/bench/gemv.lua --hint q_layout=flat --hint q_matmul=fused --hint gemv_q_x=q8x2 \
        --iters 100 "$@" >>"$OUT/30d_gemv.jsonl" 2>>"$OUT/30d_err.txt"; }
g --shape glu:6912,1152 --dtype q5_0 --sweep gemv_q_unroll=1,2,4 --sweep gemv_q_rows=4,8 --label gemma
g --shape glu:8192,2048 --dtype q4_k --sweep gemv_q_unroll=1,2,4 --sweep gemv_q_rows=2,4,8 --label llama
g --shape glu:6912,1152 --dtype q5_0 --sweep gemv_q_unroll=1,2,4 --sweep gemv_q_wg=64,256 --label gemma-wg
DOPPLER_KERNEL_STATS=1 timeout 120 $B recipes/bench/gemv.lua --hint q_layout=flat --hint q_matmul=fused \
  --hint gemv_q_x=q8x2 --iters 5 --shape glu:6912,1152 --dtype q5_0 --sweep gemv_q_unroll=1,2,4 2>&1 \
  | grep -E "gemv_q.*Register" | sed 's/Binary Size.*//' >>"$OUT/30d_stats.txt"
python3 - "$OUT/30d_gemv.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        h = ",".join("%s=%s" % kv for kv in sorted(d["hints"].items()) if kv[0] not in ("q_layout", "q_matmul", "gemv_q_x"))
        print("%-9s %-5s %6d %6d %-40s wg=%d rows=%d un=%d %8.2f us %7.1f GB/s" % (d["label"], d["dtype"], d["N"], d["K"], h,
              d["wg"], d["rows"], d["un"], d["us_per_call"], d["gb_s"]))
PY
cat "$OUT/30d_stats.txt"
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
dec() { local label=$1 m=$2; shift 2
  timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 --tokens 128 --runs 2 \
    --no-profile "$@" >>"$OUT/30d_decode.jsonl" 2>>"$OUT/30d_err.txt"; }
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    dec un0 $m; dec un2 $m --hint gemv_q_unroll=2; dec un4 $m --hint gemv_q_unroll=4
  done
done
python3 - "$OUT/30d_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["model"].split("/")[-1][:16], "%-6s" % d["label"], "decode %.1f p50 %.4f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0))
PY
tail -3 "$OUT/30d_err.txt"
