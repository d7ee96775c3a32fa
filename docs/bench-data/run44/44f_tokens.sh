#!/bin/bash
# Run 44f (session 37): decode tok/s by the number of new tokens (32, 128, 512 after a 32-token prompt; 3
# alternating processes each; Gemma 3 1B Q4_K_M), and doppler tune's wall-clock score of one knob with
# --tokens 32 and 128: does a generation pay a fixed cost that a 32-token measurement shows (44e's tune read
# ~1.40 ms per token where decode.lua reads ~1.14)?
# On the lent GPU machine: bash docs/bench-data/run44/44f_tokens.sh
. scripts/device/env.sh
M=$(model gemma-q4_k_m)
for i in 1 2 3; do
  for n in 32 128 512; do
    $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens $n --runs 2 --no-profile --label "tokens $n" \
      >> $OUT/44f_decode.jsonl 2>> $OUT/44f_err.txt
  done
done
for n in 32 128; do
  timeout 120 $B tune --model $M --knobs gemv_rows --tokens $n --dry-run > $OUT/44f_tune_$n.txt 2>&1
  echo "tune --tokens $n rc=$?"; grep "gemv_rows=" $OUT/44f_tune_$n.txt
done
python3 - "$OUT" > $OUT/44f_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/44f_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append((d["run"], d["decode_tok_s"], d["p50_ms"], d["p90_ms"]))
for k, v in g.items():
    print("%-11s" % k, " | ".join("run %d %.1f tok/s p50 %.3f p90 %.3f" % x for x in v))
PY
cat $OUT/44f_summary.txt
