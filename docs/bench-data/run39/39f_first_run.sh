#!/usr/bin/env bash
# Run 39f (session 32): 39e's issue-7 stage read Gemma 3 1B Q4_K_M's first timed run at 659.7 tok/s (p90 3.1 ms;
# 38f: 825.8). Whether the session's Lua does that: decode.lua as the stage runs it, fresh processes, alternating
# A (.abX: 223e1a4's Lua) and B (the tree), the first right after the model's conversion; then test_gguf_fixtures.
set -u
. scripts/device/env.sh
Q=$(model gemma-q4_k_m)
for r in 1 2 3; do for ab in B A; do
  home=$PWD; [ $ab = A ] && home=$PWD/.abX
  DOPPLER_HOME=$home timeout 120 $B $home/recipes/bench/decode.lua --model $Q --prompt-tokens 32 --tokens 128 --runs 3 \
    --label "$ab $r" >> $OUT/39f_decode.jsonl 2>> $OUT/39f_err.txt
done; done
python3 - <<PY
import json
for l in open('$OUT/39f_decode.jsonl'):
    r = json.loads(l)
    print(r['label'], r['run'], round(r['decode_tok_s'], 1), 'p50', round(r['p50_ms'], 3), 'p90', round(r['p90_ms'], 3), 'prefill', round(r['prefill_tok_s']))
PY
timeout 200 $B tests/lua/test_gguf_fixtures.lua > $OUT/39f_h100_t_gguf_fixtures.txt 2>&1; tail -1 $OUT/39f_h100_t_gguf_fixtures.txt
