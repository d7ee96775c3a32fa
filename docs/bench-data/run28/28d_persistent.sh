#!/usr/bin/env bash
# Run 28d (session 21), nvidia-h100-x1: the probe's third grid barrier (--sync fence: device-scope release and
# acquire by one invocation per workgroup, workgroup-scope barriers for the rest) against 28c's two, two rounds.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
J=$OUT/28d_probe.jsonl
(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 || true) | head -1
p() { echo "# $*" >>"$OUT/err.txt"; timeout 120 $B recipes/bench/persistent.lua "$@" >>"$J" 2>>"$OUT/err.txt"; }
for round in 1 2; do
  for s in llama gemma; do
    for w in f16 q4; do
      for sy in fence volatile acquire; do p --shape $s --weights $w --sync $sy --modes dispatch,persistent,sync --label r$round; done
    done
  done
done
python3 - "$J" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d = json.loads(l)
    print("%-3s %-6s %-4s %-8s %-16s %.4f ms/tok  %7.1f tok/s  %6.1f GB/s  %.2f us/step" % (
        d.get("label"), d["shape"], d["weights"], d["sync"], d["mode"], d["ms_per_token"],
        d["tok_s"], d["gb_s"], d["us_per_step"]))
PY
grep -v '^#' "$OUT/err.txt" | tail -3
echo "all done $(date +%T)"
