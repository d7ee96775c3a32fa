#!/bin/bash
# Run 47b (session 40): the fusion attention_o (the output projection in attention_decode's dispatch: its
# workgroups request their rows of W_o, then wait inside the dispatch for the heads' outputs) on the H200.
# First correctness where the two roles run in one dispatch (lavapipe runs them as two): the tests that
# decode through it. Then decode, the default (attention_o on) against --hint fusion=-attention_o, in fresh
# processes that alternate (4 rounds; Gemma 3 1B and Llama 3.2 1B, Q4_K_M and F16), and one profiled process
# per setting for Gemma 3 1B Q4_K_M (GPU ms per kernel).
# On the lent GPU machine: bash docs/bench-data/run47/47b_attention_o.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
t0=$(date +%s)
for t in fuse_attn gpu_loop gemma3_fixtures families_fixtures gguf_fixtures side_prefetch; do
  timeout 300 $B tests/lua/test_$t.lua > $OUT/t.txt 2>&1
  echo "test_$t rc=$?: $(tail -1 $OUT/t.txt)" >> $OUT/47b_summary.txt
  { echo "== test_$t"; grep -v "^ok" $OUT/t.txt; } >> $OUT/47b_tests.txt
done
rm -f $OUT/t.txt
echo "tests $(( $(date +%s) - t0 )) s" >> $OUT/47b_summary.txt
GQ=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m); G16=$(model gemma); L16=$(model llama)
echo "models $(( $(date +%s) - t0 )) s" >> $OUT/47b_summary.txt
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2"
for f in on -attention_o; do
  h=; [ $f != on ] && h="--hint fusion=$f"
  timeout 60 $B $D --model $GQ $h --label "profile gemma-q4_k_m $f" >> $OUT/47b_profile.jsonl 2>> $OUT/47b_err.txt
done
for i in 1 2 3 4; do
  for m in $GQ $LQ $G16 $L16; do
    for f in on -attention_o; do
      h=; [ $f != on ] && h="--hint fusion=$f"
      timeout 60 $B $D --no-profile --model $m $h --label "$(basename $m) $f" >> $OUT/47b_ab.jsonl 2>> $OUT/47b_err.txt
    done
  done
done
python3 - "$OUT" >> $OUT/47b_summary.txt <<'PY'
import json, sys, collections, statistics
out = sys.argv[1]
g = collections.defaultdict(list)
for l in open(out + "/47b_ab.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k in sorted(g):
    v = g[k]
    print("%-32s median %.1f  min %.1f  max %.1f  n %d  %s" % (k, statistics.median(v), min(v), max(v), len(v), " ".join("%.1f" % x for x in v)))
for l in open(out + "/47b_profile.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    k = d.get("gpu_ms_per_kernel") or {}
    print(d["label"], "decode %.1f" % d["decode_tok_s"], " ".join("%s %.4f" % (n, t) for n, t in sorted(k.items())))
PY
echo "total $(( $(date +%s) - t0 )) s" >> $OUT/47b_summary.txt
cat $OUT/47b_summary.txt
