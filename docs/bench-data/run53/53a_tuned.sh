#!/bin/bash
# Run 53a (session 46): what `doppler tune` gives a user of the H100 at HEAD (8e31705; the code as at a32c0ad).
# For Gemma 3 1B Q4_K_M and Llama 3.2 1B Q4_K_M (the issue-7 models): `doppler tune --model M --dry-run --json`
# over every knob that applies, then the issue-7 decode (128 tokens after 32) in fresh processes alternating the
# defaults and the tune's picks (passed as --hint, which is what the tune cache does for `doppler run`), 3 rounds,
# while LIMIT (seconds, default 540) allows. Last measured in session 26 (33f: lm_head_groups and gemv_rows only).
# On the lent GPU machine: LIMIT=540 bash docs/bench-data/run53/53a_tuned.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
T0=$(date +%s)
LIMIT=${LIMIT:-540}
left() { [ $(( $(date +%s) - T0 )) -lt $(( LIMIT - $1 )) ]; }
for name in gemma-q4_k_m llama-q4_k_m; do
  m=$(model $name)
  left 150 || break
  timeout 240 $B tune --model $m --dry-run --json > $OUT/53a_tune_$name.json 2> $OUT/53a_tune_$name.txt
  echo "$name tune rc=$? at $(( $(date +%s) - T0 )) s" >> $OUT/53a_log.txt
  H=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' '.join('--hint %s=%s' % kv for kv in sorted(d['hints'].items())))" $OUT/53a_tune_$name.json 2>>$OUT/53a_log.txt)
  echo "$name picks: $H" >> $OUT/53a_log.txt
  for r in 1 2 3; do
    left 60 || break
    timeout 100 $B recipes/bench/decode.lua --model $m --prompt-tokens 32 --tokens 128 --runs 1 --no-profile \
      --label "$name defaults" >> $OUT/53a_decode.jsonl 2>> $OUT/53a_err.txt
    [ -n "$H" ] || continue
    timeout 100 $B recipes/bench/decode.lua --model $m --prompt-tokens 32 --tokens 128 --runs 1 --no-profile $H \
      --label "$name tuned" >> $OUT/53a_decode.jsonl 2>> $OUT/53a_err.txt
  done
done
python3 - $OUT/53a_decode.jsonl > $OUT/53a_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for lab, v in sorted(g.items()):
    print("%-24s median %.1f  all %s" % (lab, statistics.median(v), " ".join("%.1f" % x for x in v)))
PY
echo "total $(( $(date +%s) - T0 )) s" >> $OUT/53a_log.txt
cat $OUT/53a_log.txt $OUT/53a_summary.txt
for n in gemma-q4_k_m llama-q4_k_m; do tail -5 $OUT/53a_tune_$n.txt; done
