#!/usr/bin/env bash
# Run 34c (session 27), nvidia-h100-x1: the fused MLP probe with down's columns as f16 in blocks of 8, so
# that a workgroup may make as few rows of h as the engine's gate+up GEMV does (8: 864 or 1024 workgroups,
# each adding all of y); rows per workgroup 8 to 32.
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for round in 1 2; do
  for shape in gemma llama; do
    for down in f16; do
      for rw in "8 128" "8 256" "16 256" "16 128" "32 256" "32 512"; do
        set -- $rw
        timeout 60 $B recipes/bench/glu_down.lua --shape $shape --down $down --r $1 --wg $2 --tokens 16 --runs 5 \
          --modes split,fused,fused_nopref,fused_tail,h,down --label round$round >>"$OUT/34c_probe.jsonl" 2>>"$OUT/34c_err.txt"
      done
    done
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
python3 - "$OUT/34c_probe.jsonl" <<'PY'
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
tail -3 "$OUT/34c_err.txt"
echo "done $(( $(date +%s) - T0 )) s"
