#!/bin/bash
# Run 46g (session 39): the binary at 3993e51 (DOPPLER_SIDE_QUEUE=F[.I], which changed how the device's queues are
# made) on the H200: the side prefetcher's and the GPU loop's tests, the refusal of a queue of the main family,
# and one decode with the side queue named as auto picks it (2) and as the default.
# On the lent GPU machine: bash docs/bench-data/run46/46g_check.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
for t in side_prefetch gpu_loop; do
  timeout 120 $B tests/lua/test_$t.lua > /tmp/t_$t.txt 2>&1
  echo "test_$t rc=$? $(tail -1 /tmp/t_$t.txt)" >> $OUT/46g_summary.txt
done
echo 'print(require("doppler").device():caps().name)' > /tmp/dev.lua
DOPPLER_SIDE_QUEUE=0.1 timeout 30 $B /tmp/dev.lua > /tmp/q.txt 2>&1; echo "DOPPLER_SIDE_QUEUE=0.1 rc=$? $(head -1 /tmp/q.txt)" >> $OUT/46g_summary.txt
M=$(model gemma)
for q in 2 auto; do
  if [ $q = auto ]; then unset DOPPLER_SIDE_QUEUE; else export DOPPLER_SIDE_QUEUE=$q; fi
  timeout 60 $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --no-profile --label "side=$q" >> $OUT/46g_decode.jsonl 2>> $OUT/46g_err.txt
  echo "decode side=$q rc=$? $(tail -1 $OUT/46g_decode.jsonl | python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%.1f tok/s" % d["decode_tok_s"])')" >> $OUT/46g_summary.txt
done
unset DOPPLER_SIDE_QUEUE
cat $OUT/46g_summary.txt; tail -3 $OUT/46g_err.txt
