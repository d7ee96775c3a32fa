#!/usr/bin/env bash
# Run 32a (session 25), nvidia-h100-x1: the persistent-kernel probe's new chain mode (a dispatch per step with
# no barriers, each workgroup waiting in the shader for the workgroups of the dispatches before, after
# requesting its weights) against the dispatch chain (barriers) and the persistent dispatch, on token-shaped
# chains (5 steps per layer, attention over 160 positions, LM head), Llama 3.2 1B and Gemma 3 1B shapes, f16
# and 4-bit; 132 workgroups of 1024 (the probe's layout) and 528 of 256; empty steps (sync); two rounds.
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
J=$OUT/32a_probe.jsonl
p() { echo "# $*" >>"$OUT/32a_err.txt"; timeout 120 $B recipes/bench/persistent.lua "$@" >>"$J" 2>>"$OUT/32a_err.txt"; }
for round in 1 2; do
  for s in llama gemma; do
    p --shape $s --modes sync --label r$round
    for w in f16 q4; do
      p --shape $s --weights $w --modes dispatch,chain,persistent --label r$round
      p --shape $s --weights $w --modes dispatch,chain,persistent --wg 256 --groups 528 --label r$round-wg256
    done
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
python3 - "$J" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d = json.loads(l)
    print("%-9s %-6s %-4s %-15s g=%-4d wg=%-5d %.4f ms/tok  %7.1f tok/s  %6.1f GB/s  %.2f us/step  barriers %d" % (
        d.get("label"), d["shape"], d["weights"], d["mode"], d["groups"], d["wg"], d["ms_per_token"],
        d["tok_s"], d["gb_s"], d["us_per_step"], d["barriers"]))
PY
grep -v '^#' "$OUT/32a_err.txt" | tail -5
echo "done $(( $(date +%s) - T0 )) s"
