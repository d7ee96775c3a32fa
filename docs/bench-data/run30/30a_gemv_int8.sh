#!/usr/bin/env bash
# Run 30a (session 23), nvidia-h100-x1: what one GEMV costs per weight format at the decode shapes of Gemma 3 1B
# and Llama 3.2 1B (recipes/bench/gemv.lua, flat layout, q_matmul=fused so the quantised blocks are read as
# they are): f16 (what the decode runs on today for q/k/v, o and down) against q8_0 (about the bytes of an
# int8 copy) and the files' own formats, with float (act) and int8 (q8, q8x2) activations.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
GS="--shape 1536,1152 --shape 1152,1024 --shape 1152,6912 --shape glu:6912,1152"
LS="--shape 3072,2048 --shape 2048,2048 --shape 2048,8192 --shape glu:8192,2048"
g() { timeout 280 $B recipes/bench/gemv.lua --hint q_layout=flat --hint q_matmul=fused --iters 100 "$@" \
        >>"$OUT/30a_gemv.jsonl" 2>>"$OUT/30a_err.txt"; echo "done $* $(date +%T)"; }
g $GS $LS --dtype f16 --label f16
g $GS $LS --dtype q8_0 --sweep gemv_q_x=act,q8,q8x2 --label q8_0
g $GS --dtype q5_0 --sweep gemv_q_x=act,q8x2 --label gemma-own
g $LS --dtype q4_k,q6_k --sweep gemv_q_x=act,q8x2 --label llama-own
g $GS $LS --dtype f16 --label f16-again
python3 - "$OUT/30a_gemv.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        h = ",".join("%s=%s" % kv for kv in sorted(d["hints"].items()) if kv[0] not in ("q_layout", "q_matmul"))
        print("%-10s %-6s %-5s %6d %6d %-14s %-10s %8.2f us %7.1f GB/s" % (d["label"], d["op"], d["dtype"], d["N"], d["K"],
              h, d["kernel"], d["us_per_call"], d["gb_s"]))
PY
