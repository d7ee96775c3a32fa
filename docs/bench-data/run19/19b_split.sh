#!/usr/bin/env bash
# 19b: where gemv_q's time goes: the kernel as is (head), with its arithmetic replaced by a trivial use of
# the loaded words (tm: memory only), and with every load from one block (tc: arithmetic only, loads hit L1)
set -u
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export DOPPLER_CACHE_DIR=/tmp/dpc B=$PWD/build-h100/doppler DOPPLER_BIN=$PWD/build-h100/doppler
[ -f /usr/lib/x86_64-linux-gnu/libvulkan.so.1 ] || { for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; }
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
S="--shape glu:8192,2048 --shape 2048,8192 --shape 2048,2048 --shape glu:6912,1152 --shape 1152,6912 --shape 1024,1152"
for t in head tm tc; do
  DOPPLER_HOME=$PWD/scratch/$t timeout 250 $B recipes/bench/gemv.lua $S --dtype q4_k,q6_k,q5_0,q8_0 --hint q_matmul=fused \
    --iters 30 --tol 1e30 --label $t > $OUT/19b2_$t.jsonl 2>>$OUT/err.txt
done
timeout 120 $B recipes/bench/gemv.lua $S --dtype f16 --iters 30 --label f16 > $OUT/19b2_f16.jsonl 2>>$OUT/err.txt
python3 - $OUT <<'PY'
import json,sys,glob,collections
rows=collections.OrderedDict()
for t in ["head","tm","tc","f16"]:
    for l in open(sys.argv[1]+"/19b2_%s.jsonl"%t):
        if not l.startswith("{"): continue
        d=json.loads(l)
        key=(d.get("op"), d.get("N"), d.get("K"), d.get("dtype"))
        rows.setdefault(key,{})[t]=(d.get("us_per_call"), d.get("gb_s"), d.get("weight_bytes"))
for k,v in rows.items():
    print(k, " ".join("%s=%.1fus/%.0fGB/s"%(t,x[0] or 0,x[1] or 0) for t,x in v.items()), "MB=%.2f"%((list(v.values())[0][2] or 0)/1e6))
PY
tail -3 $OUT/err.txt
