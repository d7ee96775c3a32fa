#!/usr/bin/env bash
# Run 38d (session 31), nvidia-h100-x1: the clock warm-up in the engine (b26ffc2, hint clock_warmup=auto: on here).
# 1. A user's first run: `doppler run` (8-token prompt, 128 tokens) with empty shader caches (doppler's SPIR-V
#    cache and the driver's, __GL_SHADER_DISK_CACHE=0), so it compiles every kernel: off / auto, two each.
# 2. decode.lua's first process, caches empty likewise: per-step latencies of its runs, off / auto.
# 3. The steady state: decode.lua with warm caches, off / auto alternating, two rounds (the warm-up must cost
#    nothing there). 4. The tests that touch it.
set -u
. scripts/device/env.sh
Q=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
IDS=2,651,6974,573,235,6523,603,3868
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --no-profile --latencies"
for m in $Q $LQ; do n=$(basename $m .gguf)
  for r in 1 2; do for w in off auto; do
    sleep 4; echo "$n cold run $w $r" >> $OUT/38d_run.txt
    DOPPLER_CACHE_DIR=/tmp/dpc-$n-$w-$r __GL_SHADER_DISK_CACHE=0 timeout 120 $B run --model $m --ids $IDS \
      --max-tokens 128 --hint clock_warmup=$w >/dev/null 2>>$OUT/38d_run.txt
  done; done
  for w in off auto; do
    sleep 4
    DOPPLER_CACHE_DIR=/tmp/dpc-$n-d-$w __GL_SHADER_DISK_CACHE=0 timeout 120 $B $D --model $m --runs 2 \
      --label $n-cold-$w --hint clock_warmup=$w >> $OUT/38d_decode.jsonl 2>>$OUT/38d_err.txt
  done
  for r in 1 2; do for w in off auto; do
    timeout 120 $B $D --model $m --runs 2 --label $n-warm-$w --hint clock_warmup=$w >> $OUT/38d_decode.jsonl 2>>$OUT/38d_err.txt
  done; done
done
grep -v "^$" $OUT/38d_run.txt | grep -v "^loaded"
python3 - $OUT/38d_decode.jsonl <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d = json.loads(l); ms = d["latencies_ms"]
    chunks = [sum(ms[i:i + 16]) for i in range(0, len(ms), 16)]
    print(d["label"], "run", d["run"], "tok/s %.1f p50 %.3f p90 %.3f" % (d["decode_tok_s"], d["p50_ms"], d["p90_ms"]),
          "ttft %.2f" % d["ttft_ms"], "chunks ms", " ".join("%.1f" % c for c in chunks))
PY
for t in warmup side_prefetch gpu_loop bench; do
  timeout 200 $B tests/lua/test_$t.lua > $OUT/38d_h100_t_$t.txt 2>&1; echo "test_$t rc $?: $(tail -1 $OUT/38d_h100_t_$t.txt)"
done
tail -3 $OUT/38d_err.txt
