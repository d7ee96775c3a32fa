#!/usr/bin/env bash
# 19c: why recipes/bench/gemv.lua's per-call times exceed the same kernels' in-decode GPU times: copies and iters
set -u
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export DOPPLER_CACHE_DIR=/tmp/dpc B=$PWD/build-h100/doppler DOPPLER_BIN=$PWD/build-h100/doppler
[ -f /usr/lib/x86_64-linux-gnu/libvulkan.so.1 ] || { for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; }
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
S="--shape 1152,1024 --shape 1152,6912 --shape glu:6912,1152"
for c in 1 4 auto; do for it in 30 300; do
  timeout 120 $B recipes/bench/gemv.lua $S --dtype f16 --copies $c --iters $it --label c$c-i$it >> $OUT/19c.jsonl 2>>$OUT/err.txt
done; done
timeout 120 $B recipes/bench/gemv.lua $S --dtype q5_0 --hint q_matmul=fused --copies 1 --iters 300 --label q-c1-i300 >> $OUT/19c.jsonl 2>>$OUT/err.txt
timeout 120 $B recipes/bench/gemv.lua $S --dtype q5_0 --hint q_matmul=fused --iters 300 --label q-cauto-i300 >> $OUT/19c.jsonl 2>>$OUT/err.txt
python3 - $OUT/19c.jsonl <<'PY'
import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d=json.loads(l)
        print("%-14s %-6s %5d x %5d %-5s copies %2d  gpu %6.1f us  wall %6.1f us" % (d["label"], d["op"], d["N"], d["K"], d["dtype"], d["copies"], d.get("us_per_call") or 0, d.get("us_per_call_wall") or 0))
PY
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks.mem --format=csv 2>&1 | tail -2
