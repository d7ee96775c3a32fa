#!/bin/bash
# Run 54c (session 47): 54a again after the probe's mixed GEMVs were changed to read every chunk of a lane's rows
# in one round trip (lanes per row by the row's length, `--un` chunks per lane: 8, and 4 and 16 once; once without
# the head), against one persistent dispatch, GEMVs alone and with the probe's attention step (96 positions), two
# rounds; then, on a machine other than an H100 (54a has the H100's), doppler's own decode of the synthetic Q4_K_M
# models in the same call (2 fresh processes each, the first profiled). Run at bdba599, whose probe change was then
# reverted: apply it first (`git apply docs/bench-data/run54/54c_rows_at_once.diff`). On the lent GPU machine, as
# run: NO_DECODE=1 LIMIT=300 bash docs/bench-data/run54/54c_rows_at_once.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
T0=$(date +%s)
LIMIT=${LIMIT:-540}
left() { [ $(( $(date +%s) - T0 )) -lt $(( LIMIT - $1 )) ]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/54c_gpu.txt 2>&1
P="$B recipes/bench/persistent.lua --weights q4_k_m --tokens 32 --runs 5"
for round in 1 2; do
  for shape in gemma llama; do
    left 200 || break
    $P --shape $shape --no-attention --label "r$round" >> $OUT/54c_probe.jsonl 2>>$OUT/54c_err.txt
    $P --shape $shape --context 96 --label "r$round" >> $OUT/54c_probe.jsonl 2>>$OUT/54c_err.txt
    if [ $round = 1 ]; then
      for un in 4 16; do
        $P --shape $shape --no-attention --un $un --label "r1-un$un" >> $OUT/54c_probe.jsonl 2>>$OUT/54c_err.txt
      done
      $P --shape $shape --no-attention --no-head --label "r1-nohead" >> $OUT/54c_probe.jsonl 2>>$OUT/54c_err.txt
    fi
  done
done
echo "probe done $(( $(date +%s) - T0 )) s" >> $OUT/54c_log.txt
# doppler's decode only where the machine is not an H100: 54a timed it on this kind already (making the models
# takes ~150 s of a call), and not with NO_DECODE=1
grep -q H100 $OUT/54c_gpu.txt && DECODE_MODELS= || DECODE_MODELS="gemma-q4_k_m llama-q4_k_m"
[ -n "${NO_DECODE:-}" ] && DECODE_MODELS=""
for m in $DECODE_MODELS; do
  left 150 || break
  path=$(model $m)
  for i in 1 2; do
    prof=--no-profile; [ $i = 1 ] && prof=
    timeout 120 $B recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 1 $prof \
      --label "$m-$i" >> $OUT/54c_decode.jsonl 2>>$OUT/54c_err.txt
  done
done
echo "decode done $(( $(date +%s) - T0 )) s" >> $OUT/54c_log.txt
python3 - $OUT/54c_probe.jsonl $OUT/54c_decode.jsonl > $OUT/54c_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    print("%-7s %-6s %-10s attn=%-5s un=%d %8.4f ms/token %8.1f tok/s %7.1f GB/s %6.2f us/step  %.3f GB/token" % (
        d["label"], d["shape"], d["mode"], d["attention"], d["un"], d["ms_per_token"], d["tok_s"], d["gb_s"],
        d["us_per_step"], d["weight_bytes_per_token"] / 1e9))
try:
    for l in open(sys.argv[2]):
        try: d = json.loads(l)
        except Exception: continue
        k = d.get("gpu_ms_per_kernel") or {}
        print("%-16s decode %.1f tok/s p50 %.4f ms  gpu %s" % (d["label"], d["decode_tok_s"], d["p50_ms"],
              " ".join("%s=%.4f" % kv for kv in sorted(k.items(), key=lambda kv: -kv[1]))))
except FileNotFoundError:
    pass
PY
echo "total $(( $(date +%s) - T0 )) s" >> $OUT/54c_log.txt
cat $OUT/54c_gpu.txt $OUT/54c_summary.txt $OUT/54c_log.txt; tail -5 $OUT/54c_err.txt
