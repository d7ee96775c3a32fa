#!/usr/bin/env bash
# Run 39e (session 32), nvidia-h100-x1, at the session's last code: the issue-7 stage of scripts/device/h100-bench.sh
# (no kernel changed: a check that the decode did not move); `doppler run` as a user types it, twice per Q4_K_M
# model; --chat, three turns, A (.abX: 223e1a4's Lua) against B (the tree), /stats after each turn; the tests the
# session's changes touch, in one file.
set -u
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
TOP=$OUT
OUT=$TOP/39e_issue7 STAGES="issue7" timeout 480 bash scripts/device/h100-bench.sh 2>&1 | tail -12
echo "issue7 done $(( $(date +%s) - T0 )) s"
. scripts/device/env.sh
OUT=$TOP
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do for r in 1 2; do
  echo "$(basename $m) run $r" >> $OUT/39e_run.txt
  timeout 60 $B run --model $m --ids 2,651,6974,573,235,6523,603,3868 --max-tokens 128 >/dev/null 2>>$OUT/39e_run.txt
done; done
conv='Hello there, who are you?\n/stats\nTell me a long story about the sea.\n/stats\nAnd another one, longer.\n/stats\n'
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do for r in 1 2; do for ab in A B; do
  home=$PWD; [ $ab = A ] && home=$PWD/.abX
  echo "== $(basename $m) $ab round $r" >> $OUT/39e_chat.txt
  printf "$conv" | DOPPLER_HOME=$home timeout 60 $B run --model $m --chat --max-tokens 128 --temperature 0.8 --seed 11 \
    2>>$OUT/39e_err.txt | grep '^\[context' >> $OUT/39e_chat.txt
done; done; done
for t in gguf_fixtures gpu_loop bench warmup; do
  echo "== test_$t" >> $OUT/39e_tests.txt
  timeout 200 $B tests/lua/test_$t.lua >> $OUT/39e_tests.txt 2>&1; echo "test_$t rc $?: $(tail -1 $OUT/39e_tests.txt)"
done
for t in cli chat; do
  echo "== test_$t.sh" >> $OUT/39e_tests.txt
  DOPPLER_BIN=$B timeout 200 bash tests/e2e/test_$t.sh >> $OUT/39e_tests.txt 2>&1; echo "test_$t.sh rc $?: $(tail -1 $OUT/39e_tests.txt)"
done
cat $OUT/39e_run.txt $OUT/39e_chat.txt
echo "done $(( $(date +%s) - T0 )) s"
