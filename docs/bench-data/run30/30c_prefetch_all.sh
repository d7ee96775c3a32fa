#!/usr/bin/env bash
# Run 30c (session 23), nvidia-h100-x1: the persistent-kernel probe of run 28 with a step's weights requested
# whole before the grid barrier (--prefetch N: the first N iterations of --un chunks per lane, all of a step's
# where it has at most N; run 28 is --prefetch 1). GEMV chains (--no-attention, as 28d) and chains with an
# attention step (as 28e) at Llama 3.2 1B's and Gemma 3 1B's shapes, dispatch and persistent modes, two rounds.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
J=$OUT/30c_probe.jsonl
p() { echo "# $*" >>"$OUT/30c_err.txt"; timeout 120 $B recipes/bench/persistent.lua "$@" >>"$J" 2>>"$OUT/30c_err.txt"; }
# registers and local memory (spills) of the persistent kernel per setting
for pf in 1 2 4; do
  DOPPLER_KERNEL_STATS=1 timeout 60 $B recipes/bench/persistent.lua --shape gemma --weights q4 --no-attention \
    --modes persistent --runs 1 --tokens 2 --prefetch $pf 2>&1 | grep -iE "persistent_chain|register|local" | head -12 \
    | sed "s/^/pf$pf: /" >>"$OUT/30c_stats.txt"
done
for round in 1 2; do
  for s in gemma llama; do
    for pf in 1 2 4; do p --shape $s --weights q4 --no-attention --prefetch $pf --label r$round; done
    p --shape $s --weights q4 --no-attention --prefetch 8 --un 1 --label r$round
    for pf in 1 4; do p --shape $s --weights f16 --no-attention --prefetch $pf --label r$round; done
    for pf in 1 4; do p --shape $s --weights q4 --prefetch $pf --label r$round; done
  done
done
python3 - "$J" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d = json.loads(l)
    print("%-3s %-6s %-4s attn=%-5s un=%d pf=%d %-11s %.4f ms/tok %7.1f tok/s %6.1f GB/s %.2f us/step" % (
        d.get("label"), d["shape"], d["weights"], d["attention"], d["un"], d["prefetch"], d["mode"], d["ms_per_token"],
        d["tok_s"], d["gb_s"], d["us_per_step"]))
PY
cat "$OUT/30c_stats.txt" | head -30
grep -v '^#' "$OUT/30c_err.txt" | tail -5
echo "all done $(date +%T)"
