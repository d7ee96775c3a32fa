#!/usr/bin/env bash
# Run 38a (session 31), nvidia-h100-x1: the first decode run of a process is slow (session 13's 20a: 356 against
# 537 tok/s at the same SM clock; 37g: 488.9 against 816-826). Where does it go? Per-step latencies
# (decode.lua --latencies) of the first runs of fresh processes, with the SM clock sampled every 20 ms, and
# `doppler run` (what a user types) twice, with its own speed report.
set -u
. scripts/device/env.sh
T0=$(date +%s)
Q=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
echo "models ready $(( $(date +%s) - T0 )) s"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 20 > $OUT/38a_clock.csv 2>&1 &
SMI=$!
mark() { echo "$(date +%H:%M:%S.%N) $*" >> $OUT/38a_marks.txt; }
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --no-profile --latencies"
for m in $Q $LQ; do n=$(basename $m .gguf)
  mark start $n warmup1
  timeout 120 $B $D --model $m --runs 4 --label $n-w1 >> $OUT/38a_decode.jsonl 2>>$OUT/38a_err.txt
  mark start $n warmup0
  timeout 120 $B $D --model $m --runs 3 --warmup 0 --label $n-w0 >> $OUT/38a_decode.jsonl 2>>$OUT/38a_err.txt
  mark start $n warmup3
  timeout 120 $B $D --model $m --runs 2 --warmup 3 --label $n-w3 >> $OUT/38a_decode.jsonl 2>>$OUT/38a_err.txt
  mark start $n side-off
  timeout 120 $B $D --model $m --runs 3 --hint side_prefetch=off --label $n-w1-side-off >> $OUT/38a_decode.jsonl 2>>$OUT/38a_err.txt
  mark start $n run
  for i in 1 2; do
    /usr/bin/time -f "wall %e s" timeout 120 $B run --model $m --ids 2,651,6974,573,235,6523,603,3868 --max-tokens 128 \
      >/dev/null 2>>$OUT/38a_run.txt
  done
  mark end $n
done
kill $SMI
python3 - $OUT/38a_decode.jsonl <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d = json.loads(l); ms = d["latencies_ms"]
    chunks = [sum(ms[i:i + 16]) for i in range(0, len(ms), 16)]
    print(d["label"], "run", d["run"], "tok/s %.1f p50 %.3f p90 %.3f" % (d["decode_tok_s"], d["p50_ms"], d["p90_ms"]),
          "ttft %.2f" % d["ttft_ms"], "chunks ms", " ".join("%.1f" % c for c in chunks))
PY
cat $OUT/38a_run.txt | grep -v "^$" | tail -20
cat $OUT/38a_marks.txt
python3 - $OUT/38a_clock.csv <<'PY'
import sys
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",") >= 4]
print("clock samples", len(rows)); last = None
for r in rows:
    if r[1] != last: print(" ".join(r)); last = r[1]
PY
tail -3 $OUT/38a_err.txt
