#!/bin/bash
# Run 45b (session 38): `doppler tune` with the 1 % margin (8ffe068, never run on a GPU before: session 37's
# device time ran out) on the nvidia-h200, Gemma 3 1B Q4_K_M and Llama 3.2 1B Q4_K_M, 44g's ten knobs; then each
# model's picks against the defaults over 3 alternating fresh processes (identical when the margin kept every
# default: then the A/B is the processes' spread).
# On the lent GPU machine: bash docs/bench-data/run45/45b_tune_margin.sh
. scripts/device/env.sh
K=attention_splits,attention_min_chunk,attention_unroll,glu_down_rows,prefetch_groups,prefetch_lead,prefetch_max_mb,lm_head_groups,gemv_rows,gemv_multi_rows
for m in gemma-q4_k_m llama-q4_k_m; do
  M=$(model $m); t0=$(date +%s)
  timeout 240 $B tune --model $M --knobs $K --dry-run --json > $OUT/45b_tune_$m.json 2> $OUT/45b_tune_$m.txt
  echo "tune $m rc=$? $(( $(date +%s) - t0 )) s" | tee -a $OUT/45b_summary.txt
  H=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' '.join('--hint %s=%s' % kv for kv in d['hints'].items()))" $OUT/45b_tune_$m.json)
  echo "$m tuned: $H" | tee -a $OUT/45b_summary.txt
  for i in 1 2 3; do
    $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --no-profile $H --label "$m tuned" >> $OUT/45b_ab.jsonl 2>> $OUT/45b_err.txt
    $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --no-profile --label "$m default" >> $OUT/45b_ab.jsonl 2>> $OUT/45b_err.txt
  done
done
python3 - "$OUT" >> $OUT/45b_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/45b_ab.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-22s n=%d median %.1f min %.1f max %.1f | %s" % (k, len(v), statistics.median(v), min(v), max(v),
          " ".join("%.1f" % x for x in v)))
PY
cat $OUT/45b_summary.txt; tail -3 $OUT/45b_err.txt
