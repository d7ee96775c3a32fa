#!/bin/bash
# Run 47d (session 40): what o's dispatch and attention's merge cost in the wall clock, after 47b/47c found o
# folded into attention's dispatch no faster. Timing-only variant trees in .abX/VARIANT (their results are wrong;
# not tests; the edits are in 47d_variants.diff), run by the same binary through DOPPLER_HOME:
#   o_empty   matmul/gemv.comp returns at once in one-token passes (o's dispatch and barrier stay, its work goes)
#   o_none    the projection after attention is not dispatched at all in one-token passes (lower.lua)
#   nomerge   attention_decode's workgroups return after storing their partials (no counter, no merge; 42d's)
# Gemma 3 1B and Llama 3.2 1B Q4_K_M (o is their only float gemv in a decode step), 4 rounds of fresh processes
# that alternate, one profiled process per variant first.
# On the lent GPU machine (.abX carried): bash docs/bench-data/run47/47d_o_bounds.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
t0=$(date +%s)
for v in o_empty nomerge; do for d in lua recipes models; do ln -sfn $PWD/$d .abX/$v/$d; done; done
for d in shaders recipes models; do ln -sfn $PWD/$d .abX/o_none/$d; done
GQ=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
echo "models $(( $(date +%s) - t0 )) s" >> $OUT/47d_summary.txt
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2"
run() {  # pass model variant
  local pass=$1 m=$2 v=$3 home=$PWD extra=--no-profile
  [ $v != base ] && home=$PWD/.abX/$v
  [ $pass = p ] && extra=
  DOPPLER_HOME=$home DOPPLER_CACHE_DIR=/tmp/dpc-$v timeout 60 $B $D $extra --model $m \
    --label "$(basename $m) $v $pass" >> $OUT/47d_decode.jsonl 2>> $OUT/47d_err.txt
}
for m in $GQ $LQ; do for v in base o_empty o_none nomerge; do run p $m $v; done; done
for i in 1 2 3 4; do for m in $GQ $LQ; do for v in base o_empty o_none nomerge; do run $i $m $v; done; done; done
python3 - "$OUT" >> $OUT/47d_summary.txt <<'PY'
import json, sys, collections, statistics
tok = collections.defaultdict(list); prof = {}
for l in open(sys.argv[1] + "/47d_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, v, p = d["label"].split()
    if p == "p": prof[(m, v)] = (d["decode_tok_s"], d.get("gpu_ms_per_kernel") or {})
    else: tok[(m, v)].append((d["decode_tok_s"], d.get("decode_tokens")))
for k in sorted(tok):
    v = [x[0] for x in tok[k]]
    print("%-16s %-8s median %.1f  min %.1f  max %.1f  n %d  tokens %s" % (k[0], k[1], statistics.median(v), min(v), max(v), len(v),
          sorted(set(x[1] for x in tok[k]))))
for k in sorted(prof):
    t, a = prof[k]
    print("profile %-16s %-8s %.1f | %s" % (k[0], k[1], t, " ".join("%s %.4f" % (n, x) for n, x in sorted(a.items()))))
PY
echo "total $(( $(date +%s) - t0 )) s" >> $OUT/47d_summary.txt
cat $OUT/47d_summary.txt
