#!/usr/bin/env bash
# Run 38f (session 31), nvidia-h100-x1, at d3f606f (the session's last code): the issue-7 stage of
# scripts/device/h100-bench.sh (the clock warm-up on by default); `doppler run` as a user types it (8-token prompt,
# 128 tokens, warm shader caches) with the new speed report, twice per Q4_K_M model; the tests the session's
# changes touch (test_warmup, test_gpu_loop, test_gemma3_fixtures).
set -u
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
TOP=$OUT
OUT=$TOP/38f_issue7 STAGES="issue7" timeout 480 bash scripts/device/h100-bench.sh 2>&1 | tail -12
echo "issue7 done $(( $(date +%s) - T0 )) s"
. scripts/device/env.sh
OUT=$TOP
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do for r in 1 2; do
  echo "$(basename $m) run $r" >> $OUT/38f_run.txt
  timeout 60 $B run --model $m --ids 2,651,6974,573,235,6523,603,3868 --max-tokens 128 >/dev/null 2>>$OUT/38f_run.txt
done; done
cat $OUT/38f_run.txt
mkdir -p $OUT/38f_tests
for t in warmup gpu_loop gemma3_fixtures; do
  timeout 100 $B tests/lua/test_$t.lua > $OUT/38f_tests/t_$t.txt 2>&1; echo "test_$t rc $?: $(tail -1 $OUT/38f_tests/t_$t.txt)"
done
echo "done $(( $(date +%s) - T0 )) s"
