#!/usr/bin/env bash
# 13a (session 13): the GPU's SM clock during decode.lua, and decode tok/s run by run (8 runs per call).
set -u
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export DOPPLER_CACHE_DIR=/tmp/dpc B=$PWD/build-h100/doppler DOPPLER_BIN=$PWD/build-h100/doppler
[ -f /usr/lib/x86_64-linux-gnu/libvulkan.so.1 ] || { for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; }
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
G=/tmp/g1b L=/tmp/l1b Q=/tmp/g1b-q4_k_m.gguf LQ=/tmp/l1b-q4_k_m.gguf
[ -d $G ] || $B synth --config models/configs/gemma-3-1b-it.config.json --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f $Q ] || $B convert $G --quant q4_k_m --out $Q --no-manifest --quiet
[ -d $L ] || $B synth --config models/configs/llama-3.2-1b-instruct.config.json --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f $LQ ] || $B convert $L --quant q4_k_m --out $LQ --no-manifest --quiet
nvidia-smi --query-gpu=clocks.max.sm,clocks.max.mem,power.limit,clocks_throttle_reasons.active --format=csv > $OUT/13a_gpu.txt 2>&1
nvidia-smi -q -d PERFORMANCE,CLOCK >> $OUT/13a_gpu.txt 2>&1
J=$OUT/13a_runs.jsonl
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 20 > $OUT/13a_clock.csv 2>&1 &
SMI=$!
mark() { echo "$(date +%H:%M:%S.%N) $*" >> $OUT/13a_marks.txt; }
for m in $Q $G $LQ; do n=$(basename $m .gguf)
  mark start $n
  timeout 150 $B recipes/bench/decode.lua --model $m --prompt-tokens 32 --tokens 128 --runs 8 --no-profile --label $n >> $J 2>>$OUT/err.txt
  mark end $n
done
kill $SMI
python3 - $J <<'PY'
import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d=json.loads(l); print(d["label"], "run", d["run"], "decode %.1f"%(d["decode_tok_s"] or 0), "p50", d.get("p50_ms"), "p90", d.get("p90_ms"))
PY
cat $OUT/13a_marks.txt
python3 - $OUT/13a_clock.csv <<'PY'
import sys
rows=[l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",")>=4]
print("samples", len(rows))
# print a compressed trace: one line per change of the SM clock
last=None
for r in rows:
    if r[1]!=last: print(" ".join(r)); last=r[1]
PY
tail -3 $OUT/err.txt
