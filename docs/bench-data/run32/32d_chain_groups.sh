#!/usr/bin/env bash
# Run 32d (session 25), nvidia-h100-x1: the probe's chain mode against its dispatch mode with more, smaller
# workgroups per step (132 x 1024 as in 32a; 528 x 256; 1056 x 128), Llama 3.2 1B and Gemma 3 1B shapes,
# f16 and 4-bit (Gemma's attention step needs 256 invocations: no 128 there); two rounds. Why: doppler's decode chained the same
# way (32b, 32c) ran 0.56-0.8x, with kernels of hundreds to thousands of workgroups.
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
J=$OUT/32d_probe.jsonl
p() { echo "# $*" >>"$OUT/32d_err.txt"; timeout 120 $B recipes/bench/persistent.lua "$@" >>"$J" 2>>"$OUT/32d_err.txt"; }
for round in 1 2; do
  for s in llama gemma; do
    G="1024 132,256 528,128 1056"; [ $s = gemma ] && G="1024 132,256 528"   # gemma's attention needs 256
    IFS=, read -ra GS <<<"$G"
    for g in "${GS[@]}"; do
      set -- $g
      p --shape $s --modes dispatch,chain --wg $1 --groups $2 --label r$round --tokens 16 --runs 3 --weights f16
      p --shape $s --modes dispatch,chain --wg $1 --groups $2 --label r$round --tokens 16 --runs 3 --weights q4
    done
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
python3 - "$J" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d = json.loads(l)
    print("%-4s %-6s %-4s %-9s g=%-5d wg=%-5d %.4f ms/tok  %7.1f tok/s  %.2f us/step" % (
        d.get("label"), d["shape"], d["weights"], d["mode"], d["groups"], d["wg"], d["ms_per_token"],
        d["tok_s"], d["us_per_step"]))
PY
grep -v '^#' "$OUT/32d_err.txt" | tail -5
echo "done $(( $(date +%s) - T0 )) s"
