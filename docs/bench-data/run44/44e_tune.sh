#!/bin/bash
# Run 44e (session 37): doppler tune on Gemma 3 1B Q4_K_M with the decode knobs that session 36's reads at light
# stages may have moved (attention's chunks, the fused MLP's rows, the side kernel, the head's workgroups, the
# float GEMVs' rows), then its picks against the defaults over alternating fresh processes.
# On the lent GPU machine: bash docs/bench-data/run44/44e_tune.sh
. scripts/device/env.sh
M=$(model gemma-q4_k_m)
K=attention_splits,attention_min_chunk,attention_unroll,glu_down_rows,prefetch_groups,prefetch_lead,prefetch_max_mb,lm_head_groups,gemv_rows,gemv_multi_rows
timeout 330 $B tune --model $M --knobs $K --dry-run --json > $OUT/44e_tune.json 2> $OUT/44e_tune.txt
echo "tune rc=$?"; tail -25 $OUT/44e_tune.txt
H=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' '.join('--hint %s=%s' % kv for kv in d['hints'].items()))" $OUT/44e_tune.json)
echo "tuned: $H"
for i in 1 2 3; do
  $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --no-profile $H --label tuned >> $OUT/44e_ab.jsonl 2>> $OUT/44e_err.txt
  $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --no-profile --label default >> $OUT/44e_ab.jsonl 2>> $OUT/44e_err.txt
done
python3 - "$OUT" > $OUT/44e_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/44e_ab.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-10s n=%d median %.1f min %.1f max %.1f | %s" % (k, len(v), statistics.median(v), min(v), max(v),
          " ".join("%.1f" % x for x in v)))
PY
cat $OUT/44e_summary.txt
