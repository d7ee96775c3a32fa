#!/usr/bin/env bash
# Run 34b (session 27), nvidia-h100-x1: the fused MLP probe again, with down's columns as 4-bit codes or f16
# (--down), the last workgroup handing y on as f32 (fused_tail), and each of split's dispatches alone (h, down).
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for round in 1 2; do
  for shape in gemma llama; do
    for down in q4 f16; do
      for rw in "32 256" "64 512" "32 512" "64 256"; do
        set -- $rw
        timeout 60 $B recipes/bench/glu_down.lua --shape $shape --down $down --r $1 --wg $2 --tokens 16 --runs 5 \
          --modes split,fused,fused_nopref,fused_tail,h,down --label round$round >>"$OUT/34b_probe.jsonl" 2>>"$OUT/34b_err.txt"
      done
    done
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
python3 - "$OUT/34b_probe.jsonl" <<'PY'
import json, sys, collections
t = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        t[(d["shape"], d["down"], d["r"], d["wg"])].append((d["mode"], d["us_per_layer"]))
for key, v in t.items():
    m = collections.defaultdict(list)
    for mode, us in v: m[mode].append(us)
    print("%-6s %-4s R %3d WG %3d  " % key + "  ".join("%s %s" % (mode, "/".join("%.2f" % x for x in us)) for mode, us in m.items()))
PY
tail -3 "$OUT/34b_err.txt"
echo "done $(( $(date +%s) - T0 )) s"
