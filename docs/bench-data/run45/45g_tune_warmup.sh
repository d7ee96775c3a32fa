#!/bin/bash
# Run 45g (session 38): `doppler tune` with the untimed warm-up before GPU-timestamp candidates too (45f's first
# candidate, scored by GPU time, read 3.94 ms per token and its plan 1.60 two candidates later), on the knobs
# 45f scored first: q_matmul, q_matmul_head, q_matmul_glu, q_layout, Gemma 3 1B Q4_K_M, nvidia-h200.
# On the lent GPU machine: bash docs/bench-data/run45/45g_tune_warmup.sh
. scripts/device/env.sh
M=$(model gemma-q4_k_m)
timeout 150 $B tune --model $M --knobs q_matmul,q_matmul_head,q_matmul_glu,q_layout --dry-run --json \
  > $OUT/45g_tune.json 2> $OUT/45g_tune.txt
echo "tune rc=$?"; cat $OUT/45g_tune.txt
