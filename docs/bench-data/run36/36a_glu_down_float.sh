#!/usr/bin/env bash
# Run 36a (session 29), nvidia-h100-x1: the fused MLP probe as a float model holds its weights (gate and up as
# f16 rows, --gate f16; down as f16 columns, --down f16), split (two dispatches per layer) against fused (one,
# down added by int64 atomics), at Gemma 3 1B and Llama 3.2 1B shapes, for a few workgroup shapes and chunks in
# flight, two rounds; beside it gemv.lua's times for the engine's own float gate+up (gemv_multi) and down (gemv).
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 200 $B recipes/bench/gemv.lua --dtype f16 --shape glu:6912,1152 --shape 1152,6912 \
  --shape glu:8192,2048 --shape 2048,8192 >>"$OUT/36a_gemv.jsonl" 2>>"$OUT/36a_err.txt"
echo "gemv done $(( $(date +%s) - T0 )) s"
for round in 1 2; do
  for shape in gemma llama; do
    for rwg in "8 128 2" "16 256 2" "32 256 2" "32 512 2" "64 512 2" "32 256 4" "16 128 2" "32 256 1"; do
      set -- $rwg
      timeout 60 $B recipes/bench/glu_down.lua --shape $shape --gate f16 --down f16 --gu $3 --r $1 --wg $2 \
        --tokens 16 --runs 5 --modes split,fused,fused_nopref,h,down --label "round$round gu$3" \
        >>"$OUT/36a_probe.jsonl" 2>>"$OUT/36a_err.txt"
    done
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
python3 - "$OUT/36a_gemv.jsonl" "$OUT/36a_probe.jsonl" <<'PY'
import json, sys, collections
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print("gemv %-6s %-5s %5dx%-5d %7.2f us %7.2f wall" % (d["op"], d.get("dtype"), d["N"], d["K"], d.get("us_per_call", -1), d.get("us_per_call_wall", -1)))
t = collections.defaultdict(lambda: collections.defaultdict(list))
for l in open(sys.argv[2]):
    if l.startswith("{"):
        d = json.loads(l)
        t[(d["shape"], d["r"], d["wg"], d["label"].split()[1])][d["mode"]].append(d["us_per_layer"])
for key, m in t.items():
    print("%-6s R %3d WG %3d %s  " % key + "  ".join("%s %s" % (mode, "/".join("%.2f" % x for x in us)) for mode, us in m.items()))
PY
tail -3 "$OUT/36a_err.txt"
echo "done $(( $(date +%s) - T0 )) s"
