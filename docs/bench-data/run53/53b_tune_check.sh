#!/bin/bash
# Run 53b (session 46): `doppler tune` with the check of its winners (tune.decide: a winner other than a knob's
# default is measured again after the default and must beat it by 1 % again), on the two issue-7 models.
# 53a found the Gemma 3 1B Q4_K_M tune keeping four winners that led their defaults by 1.0-1.2 % of GPU time, each
# default measured first after the previous knob, and decoding no faster with them. Here: the tune (every knob,
# --dry-run --json); then, for each model whose picks differ from its defaults, the issue-7 decode (128 tokens after
# 32) in fresh processes alternating the defaults and the picks (passed as --hint), 3 rounds; then test_tune on this
# GPU; each step only while LIMIT (seconds, default 540) allows.
# On the lent GPU machine: LIMIT=540 bash docs/bench-data/run53/53b_tune_check.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
T0=$(date +%s)
LIMIT=${LIMIT:-540}
left() { [ $(( $(date +%s) - T0 )) -lt $(( LIMIT - $1 )) ]; }
for name in gemma-q4_k_m llama-q4_k_m; do
  left 150 || break
  m=$(model $name)
  left 120 || break
  timeout 240 $B tune --model $m --dry-run --json > $OUT/53b_tune_$name.json 2> $OUT/53b_tune_$name.txt
  echo "$name tune rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/53b_log.txt
  # the knobs whose pick is not the value measured first (its default)
  H=$(python3 - $OUT/53b_tune_$name.json <<'PY' 2>>$OUT/53b_log.txt
import json, sys
d = json.load(open(sys.argv[1]))
first = {}
for r in d["results"]:
    first.setdefault(r["knob"], r["value"])
print(" ".join("--hint %s=%s" % (k, v) for k, v in sorted(d["hints"].items()) if str(first.get(k)) != str(v)))
PY
)
  echo "$name picks other than the defaults: ${H:-none}" >> $OUT/53b_log.txt
  grep -E 'kept|picked' $OUT/53b_tune_$name.txt >> $OUT/53b_log.txt
  [ -n "$H" ] || continue
  for r in 1 2 3; do
    left 60 || break
    timeout 100 $B recipes/bench/decode.lua --model $m --prompt-tokens 32 --tokens 128 --runs 1 --no-profile \
      --label "$name defaults" >> $OUT/53b_decode.jsonl 2>> $OUT/53b_err.txt
    timeout 100 $B recipes/bench/decode.lua --model $m --prompt-tokens 32 --tokens 128 --runs 1 --no-profile $H \
      --label "$name tuned" >> $OUT/53b_decode.jsonl 2>> $OUT/53b_err.txt
  done
done
if left 90; then
  timeout $(( LIMIT - 20 - $(date +%s) + T0 )) $B tests/lua/test_tune.lua > $OUT/53b_test_tune.txt 2>&1
  echo "test_tune rc=$? $(tail -1 $OUT/53b_test_tune.txt)" >> $OUT/53b_log.txt
fi
[ -f $OUT/53b_decode.jsonl ] && python3 - $OUT/53b_decode.jsonl > $OUT/53b_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for lab, v in sorted(g.items()):
    print("%-24s median %.1f  all %s" % (lab, statistics.median(v), " ".join("%.1f" % x for x in v)))
PY
echo "total $(( $(date +%s) - T0 )) s" >> $OUT/53b_log.txt
cat $OUT/53b_log.txt $OUT/53b_summary.txt 2>/dev/null
