#!/bin/bash
# Run 45f (session 38): `doppler tune` over every knob that applies (no --knobs; 45b ran 44g's ten) on the
# nvidia-h200, Gemma 3 1B Q4_K_M (MODELS: more, e.g. "gemma-q4_k_m llama-q4_k_m"), each followed by its picks against the defaults over
# 3 alternating fresh processes: does any default of this engine lose by more than the 1 % margin on this device?
# On the lent GPU machine: bash docs/bench-data/run45/45f_tune_all.sh
. scripts/device/env.sh
for m in ${MODELS:-gemma-q4_k_m}; do
  M=$(model $m); t0=$(date +%s)
  timeout 200 $B tune --model $M --dry-run --json > $OUT/45f_tune_$m.json 2> $OUT/45f_tune_$m.txt
  echo "tune $m rc=$? $(( $(date +%s) - t0 )) s" | tee -a $OUT/45f_summary.txt
  grep "kept\|won\|pick" $OUT/45f_tune_$m.txt | tail -30 >> $OUT/45f_summary.txt
  H=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' '.join('--hint %s=%s' % kv for kv in d['hints'].items()))" $OUT/45f_tune_$m.json)
  echo "$m tuned: $H" | tee -a $OUT/45f_summary.txt
  for i in 1 2 3; do
    timeout 60 $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --no-profile $H --label "$m tuned" >> $OUT/45f_ab.jsonl 2>> $OUT/45f_err.txt
    timeout 60 $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --no-profile --label "$m default" >> $OUT/45f_ab.jsonl 2>> $OUT/45f_err.txt
  done
done
python3 - "$OUT" >> $OUT/45f_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/45f_ab.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-22s n=%d median %.1f min %.1f max %.1f | %s" % (k, len(v), statistics.median(v), min(v), max(v),
          " ".join("%.1f" % x for x in v)))
PY
cat $OUT/45f_summary.txt; tail -3 $OUT/45f_err.txt
