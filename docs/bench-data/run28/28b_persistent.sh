#!/usr/bin/env bash
# Run 28b (session 21), nvidia-h100-x1: the persistent-kernel probe after two fixes to it: the grid barrier's
# counter read with acquire and bumped with release (28a: plain volatile reads after memoryBarrierBuffer), and
# the 4-bit path's x reads without 8-way bank conflicts (28a: ~0.3 TB/s). Same sweep shape as 28a.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
J=$OUT/28b_probe.jsonl
p() { echo "# $*" >>"$OUT/err.txt"; timeout 120 $B recipes/bench/persistent.lua "$@" >>"$J" 2>>"$OUT/err.txt"; }
for round in 1 2; do
  for s in llama gemma; do
    for w in f16 q4; do p --shape $s --weights $w --modes dispatch,persistent,sync --label base$round; done
  done
done
for un in 1 4 8; do p --shape llama --weights q4 --un $un --label un$un; done
for un in 1 4; do p --shape gemma --weights q4 --un $un --label un$un; done
p --shape gemma --weights f16 --un 4 --label un4
for w in q4 f16; do p --shape llama --weights $w --no-head --label nohead; done
p --shape llama --weights q4 --wg 512 --groups 132 --label wg512
p --shape llama --weights q4 --wg 256 --groups 528 --label g528wg256
p --shape llama --weights q4 --wg 256 --groups 264 --label g264wg256
python3 - "$J" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d = json.loads(l)
    print("%-9s %-6s %-4s %-16s G=%-4s wg=%-4s un=%s  %.4f ms/tok  %7.1f tok/s  %6.1f GB/s  %.2f us/step" % (
        d.get("label"), d["shape"], d["weights"], d["mode"], d["groups"], d["wg"], d["un"], d["ms_per_token"],
        d["tok_s"], d["gb_s"], d["us_per_step"]))
PY
grep -v '^#' "$OUT/err.txt" | tail -5
echo "all done $(date +%T)"
