#!/usr/bin/env bash
# Run 38b (session 31), nvidia-h100-x1: the clock warm-up (gpu/warmup.h, hint clock_warmup). A poll's time
# (38b_warmup_polls.lua), then `doppler run` (what a user types: a fresh process, 8-token prompt, 128 tokens) and
# decode.lua's first runs with clock_warmup=off and auto (on here), each after 3 s of an idle GPU, alternating;
# the SM clock sampled every 20 ms.
set -u
. scripts/device/env.sh
T0=$(date +%s)
Q=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
echo "models ready $(( $(date +%s) - T0 )) s"
$B docs/bench-data/run38/38b_warmup_polls.lua 2>&1 | tee $OUT/38b_polls.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu --format=csv,noheader -lms 20 > $OUT/38b_clock.csv 2>&1 &
SMI=$!
mark() { echo "$(date +%H:%M:%S.%N) $*" >> $OUT/38b_marks.txt; }
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --no-profile --latencies --runs 2"
for m in $Q $LQ; do n=$(basename $m .gguf)
  for round in 1 2; do
    for w in off auto; do
      sleep 3; mark run $n $w
      echo "$n $w round $round" >> $OUT/38b_run.txt
      timeout 60 $B run --model $m --ids 2,651,6974,573,235,6523,603,3868 --max-tokens 128 --hint clock_warmup=$w \
        >/dev/null 2>>$OUT/38b_run.txt
      sleep 3; mark decode $n $w
      timeout 60 $B $D --model $m --label $n-$w --hint clock_warmup=$w >> $OUT/38b_decode.jsonl 2>>$OUT/38b_err.txt
    done
  done
done
kill $SMI
grep -v "^$" $OUT/38b_run.txt | grep -v loaded
python3 - $OUT/38b_decode.jsonl <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d = json.loads(l); ms = d["latencies_ms"]
    chunks = [sum(ms[i:i + 16]) for i in range(0, len(ms), 16)]
    print(d["label"], "run", d["run"], "tok/s %.1f p50 %.3f p90 %.3f" % (d["decode_tok_s"], d["p50_ms"], d["p90_ms"]),
          "ttft %.2f" % d["ttft_ms"], "chunks ms", " ".join("%.1f" % c for c in chunks))
PY
tail -3 $OUT/38b_err.txt
