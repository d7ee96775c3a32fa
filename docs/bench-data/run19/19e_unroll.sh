#!/usr/bin/env bash
# 19e: gemv_q's memory-only and arithmetic-only variants (19b) with 1, 2 and 4 units in flight per thread
# (gemv_q_unroll), flat layout, with gemv.lua's warm-up
set -u
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export DOPPLER_CACHE_DIR=/tmp/dpc B=$PWD/build-h100/doppler DOPPLER_BIN=$PWD/build-h100/doppler
[ -f /usr/lib/x86_64-linux-gnu/libvulkan.so.1 ] || { for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; }
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
S="--shape glu:8192,2048 --shape 2048,8192 --shape glu:6912,1152 --shape 1152,6912"
for t in head tm tc; do
  DOPPLER_HOME=$PWD/scratch/$t timeout 250 $B recipes/bench/gemv.lua $S --dtype q4_k,q5_0 --hint q_matmul=fused \
    --hint q_layout=flat --sweep gemv_q_unroll=1,2,4 --iters 30 --tol 1e30 --label $t >> $OUT/19e_unroll.jsonl 2>>$OUT/err.txt
done
python3 - $OUT/19e_unroll.jsonl <<'PY'
import json,sys,collections
rows=collections.OrderedDict()
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d=json.loads(l)
    key=(d["op"],d["N"],d["K"],d["dtype"],d["hints"].get("gemv_q_unroll"))
    rows.setdefault(key,[]).append("%s %.1f (%.0f GB/s)"%(d["label"],d.get("us_per_call") or 0, d.get("gb_s") or 0))
for k,v in rows.items(): print(k, " | ".join(v))
PY
tail -2 $OUT/err.txt
