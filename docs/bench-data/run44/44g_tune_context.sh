#!/bin/bash
# Run 44g (session 37): doppler tune on Gemma 3 1B Q4_K_M at the session's context (hint context, 4096: the fix
# of 44f's finding), the same ten knobs as 44e, then its picks against the defaults over alternating processes.
# On the lent GPU machine: bash docs/bench-data/run44/44g_tune_context.sh
. scripts/device/env.sh
M=$(model gemma-q4_k_m)
K=attention_splits,attention_min_chunk,attention_unroll,glu_down_rows,prefetch_groups,prefetch_lead,prefetch_max_mb,lm_head_groups,gemv_rows,gemv_multi_rows
timeout 300 $B tune --model $M --knobs $K --dry-run --json > $OUT/44g_tune.json 2> $OUT/44g_tune.txt
echo "tune rc=$?"; cat $OUT/44g_tune.txt
H=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' '.join('--hint %s=%s' % kv for kv in d['hints'].items()))" $OUT/44g_tune.json)
echo "tuned: $H"
for i in 1 2 3; do
  $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --no-profile $H --label tuned >> $OUT/44g_ab.jsonl 2>> $OUT/44g_err.txt
  $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --no-profile --label default >> $OUT/44g_ab.jsonl 2>> $OUT/44g_err.txt
done
python3 - "$OUT" > $OUT/44g_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/44g_ab.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-10s n=%d median %.1f min %.1f max %.1f | %s" % (k, len(v), statistics.median(v), min(v), max(v),
          " ".join("%.1f" % x for x in v)))
PY
cat $OUT/44g_summary.txt
