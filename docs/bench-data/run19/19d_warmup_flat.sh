#!/usr/bin/env bash
# 19d: (1) recipes/bench/gemv.lua with and without the clock warm-up in one call; (2) 19b's split on the flat layout
set -u
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export DOPPLER_CACHE_DIR=/tmp/dpc B=$PWD/build-h100/doppler DOPPLER_BIN=$PWD/build-h100/doppler
[ -f /usr/lib/x86_64-linux-gnu/libvulkan.so.1 ] || { for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; }
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
S="--shape glu:6912,1152 --shape 1152,6912 --shape 1152,1024"
for w in 0 300 0 300; do
  timeout 120 $B recipes/bench/gemv.lua $S --dtype q5_0,q4_k,f16 --hint q_matmul=fused --iters 30 --warmup-ms $w --label warm$w >> $OUT/19d_warmup.jsonl 2>>$OUT/err.txt
done
S2="--shape glu:8192,2048 --shape 2048,8192 --shape glu:6912,1152 --shape 1152,6912"
for t in head tm tc; do
  DOPPLER_HOME=$PWD/scratch/$t timeout 250 $B recipes/bench/gemv.lua $S2 --dtype q4_k,q6_k,q5_0,q8_0 --hint q_matmul=fused \
    --hint q_layout=flat --iters 30 --tol 1e30 --label flat-$t >> $OUT/19d_flat.jsonl 2>>$OUT/err.txt
done
python3 - $OUT <<'PY'
import json,sys,collections
for f in ["19d_warmup","19d_flat"]:
    rows=collections.OrderedDict()
    for l in open(sys.argv[1]+"/%s.jsonl"%f):
        if not l.startswith("{"): continue
        d=json.loads(l)
        key=(d["op"],d["N"],d["K"],d["dtype"],d["layout"])
        rows.setdefault(key,[]).append("%s %.1f/%.1f"%(d["label"],d.get("us_per_call") or 0,d.get("us_per_call_wall") or 0))
    for k,v in rows.items(): print(f, k, " | ".join(v))
PY
tail -2 $OUT/err.txt
