#!/usr/bin/env bash
# Run 34a (session 27), nvidia-h100-x1: the fused MLP probe (recipes/bench/glu_down.lua) at Gemma 3 1B and
# Llama 3.2 1B shapes, split (two dispatches per layer) against fused (one, down added by int64 atomics), for a
# few workgroup shapes, two rounds; beside it gemv.lua's times for the engine's own gate+up and down kernels
# at the same shapes (what a layer's MLP costs in doppler's decode today).
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 200 $B recipes/bench/gemv.lua --dtype q5_0,q4_k,f16 --shape glu:6912,1152 --shape 1152,6912 \
  --shape glu:8192,2048 --shape 2048,8192 >>"$OUT/34a_gemv.jsonl" 2>>"$OUT/34a_err.txt"
echo "gemv done $(( $(date +%s) - T0 )) s"
for round in 1 2; do
  for shape in gemma llama; do
    for rw in "32 256" "64 256" "32 128" "64 512" "128 512"; do
      set -- $rw
      timeout 60 $B recipes/bench/glu_down.lua --shape $shape --r $1 --wg $2 --tokens 16 --runs 5 \
        --label round$round >>"$OUT/34a_probe.jsonl" 2>>"$OUT/34a_err.txt"
    done
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
python3 - "$OUT/34a_gemv.jsonl" "$OUT/34a_probe.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print("gemv %-6s %-5s %5dx%-5d %7.2f us %7.2f wall" % (d["op"], d.get("dtype"), d["N"], d["K"], d.get("us_per_call", -1), d.get("us_per_call_wall", -1)))
for l in open(sys.argv[2]):
    if l.startswith("{"):
        d = json.loads(l)
        print("probe %-7s %-6s R %3d WG %3d %-13s %7.2f us/layer %7.1f GB/s same %s" % (d["label"], d["shape"], d["r"], d["wg"], d["mode"], d["us_per_layer"], d["gb_s"], d["same_bits"]))
PY
tail -3 "$OUT/34a_err.txt"
echo "done $(( $(date +%s) - T0 )) s"
