#!/bin/bash
# Run 55b (session 48): 55a found Llama 3.2 1B Q4_K_M's decode 1.05x faster at a 3900-token prompt and 1.32x at
# 16000 with attention_splits=64 (its auto is 32). Before the auto rule changes: the same hint at the short
# prompts, where most chunks are empty (their workgroups exit at once), alternating auto and 64 in fresh
# processes, unprofiled. On the lent GPU machine: bash docs/bench-data/run55/55b_splits_short.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
T0=$(date +%s)
path=$(model llama-q4_k_m)
echo "model $(( $(date +%s) - T0 )) s" >> $OUT/55b_log.txt
for round in 1 2; do
  for pt in 32 1024; do
    for s in 0 64; do
      timeout 40 $B recipes/bench/decode.lua --model $path --prompt-tokens $pt --tokens 128 --runs 2 --no-profile \
        --hint attention_splits=$s --label "llama-q4_k_m/p$pt/splits=$s/r$round" >> $OUT/55b_decode.jsonl 2>>$OUT/55b_err.txt
      echo "p$pt splits=$s r$round rc=$? $(( $(date +%s) - T0 )) s" >> $OUT/55b_log.txt
    done
  done
done
python3 -c '
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l); print("%-40s %.1f tok/s p50 %.4f ms" % (d["label"], d["decode_tok_s"], d["p50_ms"]))
' $OUT/55b_decode.jsonl > $OUT/55b_summary.txt
cat $OUT/55b_summary.txt $OUT/55b_log.txt; tail -3 $OUT/55b_err.txt
