#!/usr/bin/env bash
# Run 32f (session 25), nvidia-h100-x1: doppler's float GEMVs (gemv.comp; gemv_multi for glu) at the defaults
# (128 invocations, 1 row) and nearer the probe's layout (512 x 4 rows, 256 x 8: 144-2048 workgroups), on the
# decode shapes of Gemma 3 1B and Llama 3.2 1B, f16; `recipes/bench/gemv.lua`, µs per call. Why: 32d found the
# chain gains only with few large workgroups; this is what doppler's own kernels cost in that layout.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for round in 1 2; do
  for h in "128 1" "512 4" "256 8"; do   # gemv_wg x gemv_rows <= 2048 (the kernels' shared memory)
    set -- $h
    timeout 250 $B recipes/bench/gemv.lua --dtype f16 --label r$round --hint gemv_wg=$1 --hint gemv_rows=$2 \
      --shape 1536,1152 --shape 1152,1024 --shape 1152,6912 --shape glu:6912,1152 \
      --shape 3072,2048 --shape 2048,2048 --shape 2048,8192 --shape glu:8192,2048 >>"$OUT/32f_gemv.jsonl" 2>>"$OUT/32f_err.txt"
  done
done
python3 - "$OUT/32f_gemv.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d = json.loads(l)
    h = d.get("hints", {})
    print("%-3s %-5s %5dx%-5d wg=%-4s rows=%-2s groups=%-14s %7.2f us  (wall %7.2f)  %7.1f GB/s" % (d.get("label"), d["op"], d["N"], d["K"],
          h.get("gemv_wg"), h.get("gemv_rows"), d.get("groups"), d.get("us_per_call", -1), d.get("us_per_call_wall", -1), d.get("gb_s", -1)))
PY
tail -3 "$OUT/32f_err.txt"
