#!/usr/bin/env bash
# Run 38g (session 31), nvidia-h100-x1, at 5d0b28d: --chat through the GPU-resident loop (default decode_chunk=16)
# against the step-by-step loop it used before (decode_chunk=1), the synthetic Gemma 3 1B and Llama 3.2 1B Q4_K_M
# (real tokenizers, random weights: the replies are noise), three turns of up to 128 tokens at temperature 0.8
# (greedy noise tends to a stop id early), /stats after each; two rounds. Then tests/e2e/test_chat.sh.
set -u
. scripts/device/env.sh
Q=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
conv='Hello there, who are you?\n/stats\nTell me a long story about the sea.\n/stats\nAnd another one, longer.\n/stats\n'
for m in $Q $LQ; do for r in 1 2; do for c in 16 1; do
  echo "== $(basename $m) decode_chunk=$c round $r" >> $OUT/38g_chat.txt
  printf "$conv" | timeout 60 $B run --model $m --chat --max-tokens 128 --temperature 0.8 --seed 11 \
    --hint decode_chunk=$c 2>>$OUT/38g_err.txt | grep '^\[context' >> $OUT/38g_chat.txt
done; done; done
cat $OUT/38g_chat.txt
DOPPLER_BIN=$B bash tests/e2e/test_chat.sh > $OUT/38g_h100_t_chat.txt 2>&1; echo "test_chat rc $?: $(tail -1 $OUT/38g_h100_t_chat.txt)"
