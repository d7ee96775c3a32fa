#!/usr/bin/env bash
# Run 22b (session 15): 22a's register counts say Llama 3.2 1B's gate+up (gemv_q, Q4_K, GLU, q8x2: 64 registers,
# 256 invocations, 8 rows = 32 threads per row) holds 262,144 invocations where an SM keeps 1,024 at 64 registers:
# two waves on 132 SMs. 16 threads per row (128 invocations, 8 rows, q8x2 forced) fit one wave. Gemma 3 1B's
# (68 registers, 16 threads per row) fits one wave now; 32 per row would make it two. Two rounds, one call.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
run() {  # model label args...
  local m=$1 label=$2; shift 2
  DOPPLER_PROFILE_SHAPES=1 timeout 150 $B recipes/bench/decode.lua --model $m --label "$label" \
    --prompt-tokens 32 --tokens 128 --runs 2 "$@" >>"$OUT/22b_waves.jsonl" 2>>"$OUT/err.txt"
}
for round in 1 2; do
  run /tmp/l1b-q4_k_m.gguf default
  run /tmp/l1b-q4_k_m.gguf tpr16 --hint gemv_q_wg=128 --hint gemv_q_rows=8 --hint gemv_q_x=q8x2
  run /tmp/g1b-q4_k_m.gguf default
  run /tmp/g1b-q4_k_m.gguf tpr32 --hint gemv_q_wg=256 --hint gemv_q_rows=8
done
python3 - "$OUT/22b_waves.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = d.get("gpu_ms_per_kernel") or {}
        g = {a: b for a, b in k.items() if a.startswith("gemv_q@") or a.startswith("lm_head")}
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f" % (d["decode_tok_s"] or 0),
              " ".join("%s %.3f" % (a, b) for a, b in sorted(g.items())))
PY
tail -3 "$OUT/err.txt" 2>/dev/null
