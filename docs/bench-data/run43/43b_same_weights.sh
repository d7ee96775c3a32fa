#!/bin/bash
# Run 43b (session 36), timing only: Gemma 3 1B Q4_K_M's decode with every layer reading layer 0's MLP weights
# (DP_SAME_W=mlp), layer 0's q/k/v and o (attn), or both (all), so that those stay in L2 from layer to layer: how
# much faster each kernel runs from L2 than from DRAM. The recipe change is a diff kept beside this script
# (43b_same_weights_experiment.diff); outputs are wrong with it, times only.
. scripts/device/env.sh
for i in 1 2; do
  for s in none mlp attn all; do
    DP_SAME_W=$s $B recipes/bench/decode.lua --model $(model gemma-q4_k_m) --prompt-tokens 32 --tokens 128 --runs 1 \
      --no-profile --label "$s" >> $OUT/43b_decode.jsonl 2>> $OUT/43b_err.txt
  done
done
for s in none mlp attn all; do
  DP_SAME_W=$s $B recipes/bench/decode.lua --model $(model gemma-q4_k_m) --prompt-tokens 32 --tokens 128 --runs 1 \
    --profile-tokens 16 --label "prof_$s" >> $OUT/43b_profile.jsonl 2>> $OUT/43b_err.txt
  DP_SAME_W=$s $B recipes/bench/decode.lua --model $(model gemma-q4_k_m) --prompt-tokens 32 --tokens 128 --runs 1 \
    --profile-tokens 16 --hint side_prefetch=off --label "prof_off_$s" >> $OUT/43b_profile.jsonl 2>> $OUT/43b_err.txt
done
python3 - "$OUT" > $OUT/43b_summary.txt <<'PY'
import json, sys
for f in ("43b_decode.jsonl", "43b_profile.jsonl"):
    for l in open(sys.argv[1] + "/" + f):
        try: d = json.loads(l)
        except Exception: continue
        k = d.get("gpu_ms_per_kernel") or {}
        print("%-14s tok/s %.1f |" % (d["label"], d["decode_tok_s"]), " ".join("%s %.4f" % (n, k[n]) for n in sorted(k)))
PY
cat $OUT/43b_summary.txt
