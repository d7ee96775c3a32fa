#!/usr/bin/env bash
# Run 22a (session 15): the driver's statistics of every decode kernel (DOPPLER_KERNEL_STATS=1,
# VK_KHR_pipeline_executable_properties) for synthetic Gemma 3 1B and Llama 3.2 1B, F16 and Q4_K_M, on the
# defaults and with q_matmul=fused (every quantised matrix in blocks); one profiled decode run each, so each
# stats line sits beside the GPU ms of its kernel.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler
B=$PWD/build-h100/doppler G=/tmp/g1b L=/tmp/l1b
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/22a_gpu.txt" 2>&1
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1 &
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1 &
wait
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet &
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet &
wait
run() {  # model label args...
  local m=$1 label=$2; shift 2
  echo "== $label $m $*" >>"$OUT/22a_stats.txt"
  DOPPLER_KERNEL_STATS=1 DOPPLER_PROFILE_SHAPES=1 timeout 150 $B recipes/bench/decode.lua --model $m --label "$label" \
    --prompt-tokens 32 --tokens 128 --runs 1 "$@" >>"$OUT/22a_decode.jsonl" 2>>"$OUT/22a_stats.txt"
}
run /tmp/g1b-q4_k_m.gguf default
run /tmp/g1b-q4_k_m.gguf fused --hint q_matmul=fused
run $G default
run /tmp/l1b-q4_k_m.gguf default
run /tmp/l1b-q4_k_m.gguf fused --hint q_matmul=fused
run $L default
grep -c "kernel stats" "$OUT/22a_stats.txt"
grep "kernel stats" "$OUT/22a_stats.txt" | sed 's/.*kernel stats: //' | cut -c1-60 | sort | uniq -c | sort -rn | head -5
grep "kernel stats" "$OUT/22a_stats.txt" | head -3
python3 - "$OUT/22a_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = d.get("gpu_ms_per_kernel") or {}
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f" % (d["decode_tok_s"] or 0),
              " ".join("%s %.3f" % (a, b) for a, b in sorted(k.items(), key=lambda x: -x[1])[:8]))
PY
tail -3 "$OUT/err.txt" 2>/dev/null
