#!/bin/bash
# Run 47f (session 40): 47b's fusion attention_o with a cheaper hand-off (47f_tagged_experiment.diff): the heads'
# outputs stored as self-validating 64-bit words (the value, and the dispatch's serial + 1 as a tag) and polled
# by o's workgroups directly, with no count, no release wait and no reload; the last o workgroup advances the
# serial. First test_fuse_attn on the H200 (both roles in one dispatch), then decode with the fusion against
# --hint fusion=-attention_o, 3 rounds of alternating fresh processes.
# On the lent GPU machine: bash docs/bench-data/run47/47f_tagged.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
t0=$(date +%s)
GQ=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
echo "models $(( $(date +%s) - t0 )) s" >> $OUT/47f_summary.txt
timeout 100 $B tests/lua/test_fuse_attn.lua > $OUT/t.txt 2>&1
echo "test_fuse_attn rc=$?: $(tail -1 $OUT/t.txt)" >> $OUT/47f_summary.txt
grep -v "^ok" $OUT/t.txt > $OUT/47f_tests.txt; rm -f $OUT/t.txt
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2 --no-profile"
for i in 1 2 3; do
  for m in $GQ $LQ $G; do
    for f in on -attention_o; do
      h=; [ $f != on ] && h="--hint fusion=$f"
      timeout 60 $B $D --model $m $h --label "$(basename $m) $f" >> $OUT/47f_ab.jsonl 2>> $OUT/47f_err.txt
    done
  done
done
python3 - "$OUT" >> $OUT/47f_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/47f_ab.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k in sorted(g):
    v = g[k]
    print("%-32s median %.1f  min %.1f  max %.1f  n %d  %s" % (k, statistics.median(v), min(v), max(v), len(v), " ".join("%.1f" % x for x in v)))
PY
echo "total $(( $(date +%s) - t0 )) s" >> $OUT/47f_summary.txt
cat $OUT/47f_summary.txt
