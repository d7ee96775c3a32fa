#!/usr/bin/env bash
# Run 36d (session 29), nvidia-h100-x1: the quantised LM head (fused/lm_head_q.comp) with its units' loads
# issued LU at a time (hint lm_head_unroll: 1 = the kernel before, 2, 4), three rounds of 2 runs, Gemma 3 1B
# Q4_K_M (Q8_0 head, 36 units per row) and Llama 3.2 1B Q4_K_M (Q6_K head, 64); profiles and the driver's
# register counts; then test_lm_head_fusion on the H100.
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
    --tokens 128 "$@" >>"$OUT/36d_decode.jsonl" 2>>"$OUT/36d_err.txt"
}
for round in 1 2 3; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    dec lu1 $m --runs 2 --no-profile --hint lm_head_unroll=1
    dec lu2 $m --runs 2 --no-profile --hint lm_head_unroll=2
    dec lu4 $m --runs 2 --no-profile --hint lm_head_unroll=4
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
python3 - "$OUT/36d_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list); tok = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        p50[key].append(d["p50_ms"]); tok[key].append(d["decode_tok_s"])
for key in p50:
    print("%-14s %-6s p50 %s  tok/s %s" % (key[0], key[1], " ".join("%.4f" % x for x in p50[key]), " ".join("%.1f" % x for x in tok[key])))
PY
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
  for lu in 1 2 4; do dec lu$lu-profile $m --runs 1 --profile-tokens 16 --hint lm_head_unroll=$lu; done
done
python3 - "$OUT/36d_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if d["gpu_ms_per_kernel"]:
        print(d["model"].split("/")[-1][:14], d["label"], {k: round(v, 4) for k, v in sorted(d["gpu_ms_per_kernel"].items(), key=lambda x: -x[1])[:6]})
PY
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
  for lu in 1 2 4; do
    DOPPLER_KERNEL_STATS=1 DOPPLER_CACHE_DIR=/tmp/dpc-stats-$lu timeout 60 $B run --model $m --ids 2,3,4 --max-tokens 4 --quiet \
      --hint lm_head_unroll=$lu 2>&1 | grep "kernel stats: lm_head_q" | head -2 >>"$OUT/36d_err.txt"
  done
done
grep "kernel stats: lm_head_q" "$OUT/36d_err.txt" | sed 's/Binary Size.*//'
echo "decode done $(( $(date +%s) - T0 )) s"
for t in lm_head_fusion; do
  timeout 200 $B tests/lua/test_$t.lua >"$OUT/36d_h100_t_$t.txt" 2>&1; echo "$t: $(tail -1 "$OUT/36d_h100_t_$t.txt")"
done
echo "done $(( $(date +%s) - T0 )) s"
