#!/usr/bin/env bash
# Run 28f (session 21), nvidia-h100-x1: what folding the RMS norm into a GEMV costs in the probe's layout (each
# workgroup sums the squares of x itself before its rows): the token chain of 28e (96 positions) with and
# without the fold (--no-norm), as dispatches and persistent, and as dispatches of 528 workgroups of 256
# (4x as many folds per step). Two rounds.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
J=$OUT/28f_probe.jsonl
(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 || true) | head -1
p() { echo "# $*" >>"$OUT/err.txt"; timeout 120 $B recipes/bench/persistent.lua "$@" >>"$J" 2>>"$OUT/err.txt"; }
for round in 1 2; do
  for s in llama gemma; do
    for w in f16 q4; do
      p --shape $s --weights $w --context 96 --label r$round-norm
      p --shape $s --weights $w --context 96 --no-norm --label r$round-nonorm
      p --shape $s --weights $w --context 96 --modes dispatch --wg 256 --dispatch-groups 528 --label r$round-norm-g528
      p --shape $s --weights $w --context 96 --modes dispatch --wg 256 --dispatch-groups 528 --no-norm --label r$round-nonorm-g528
    done
  done
done
python3 - "$J" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d = json.loads(l)
    print("%-16s %-6s %-4s %-11s G=%-4s wg=%-4s %.4f ms/tok  %7.1f tok/s  %.2f us/step" % (
        d.get("label"), d["shape"], d["weights"], d["mode"], d["groups"], d["wg"], d["ms_per_token"],
        d["tok_s"], d["us_per_step"]))
PY
grep -v '^#' "$OUT/err.txt" | tail -3
echo "all done $(date +%T)"
