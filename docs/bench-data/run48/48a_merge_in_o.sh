#!/bin/bash
# Run 48a (session 41): the prize for removing attention's chunk merge rather than moving it (session 40, 47d:
# a hand-off inside a dispatch costs what a dispatch boundary does). Design probed: attention_decode stores every
# chunk's partial (ov, m, l) and stops; o's gemv, already behind a dispatch boundary, merges the partials of its
# input elements while it loads them. Timing-only variant trees in .abX/VARIANT (results wrong; not tests; edits
# in 48a_variants.diff), run by the same binary through DOPPLER_HOME:
#   nomerge  attention_decode's workgroups return after storing their partials (47d's)
#   mo20     nomerge + o's gemv (one-token passes) reads, per 8 input elements, 20 (Gemma) / 5 (Llama) chunk
#            partials of 8 f32 and their (m, l) from L2-resident memory and merges them (the chunks of a
#            160-key context: Gemma 8 keys per chunk, Llama 32)
#   mo10     the same with 10 / 3 chunks (about the average over the run's 33..160 keys)
# Gemma 3 1B and Llama 3.2 1B Q4_K_M (o is their only float gemv in a decode step), 4 rounds of fresh processes
# that alternate, one profiled process per variant first.
# On the lent GPU machine (.abX carried): bash docs/bench-data/run48/48a_merge_in_o.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
t0=$(date +%s)
for v in nomerge mo20 mo10; do for d in lua recipes models; do ln -sfn $PWD/$d .abX/$v/$d; done; done
GQ=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
echo "models $(( $(date +%s) - t0 )) s" >> $OUT/48a_summary.txt
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2"
run() {  # pass model variant
  local pass=$1 m=$2 v=$3 home=$PWD extra=--no-profile
  [ $v != base ] && home=$PWD/.abX/$v
  [ $pass = p ] && extra=
  DOPPLER_HOME=$home DOPPLER_CACHE_DIR=/tmp/dpc-$v timeout 60 $B $D $extra --model $m \
    --label "$(basename $m) $v $pass" >> $OUT/48a_decode.jsonl 2>> $OUT/48a_err.txt
}
for m in $GQ $LQ; do for v in base nomerge mo20 mo10; do run p $m $v; done; done
for i in 1 2 3 4; do for m in $GQ $LQ; do for v in base nomerge mo20 mo10; do run $i $m $v; done; done; done
python3 - "$OUT" >> $OUT/48a_summary.txt <<'PY'
import json, sys, collections, statistics
tok = collections.defaultdict(list); prof = {}
for l in open(sys.argv[1] + "/48a_decode.jsonl"):
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
echo "total $(( $(date +%s) - t0 )) s" >> $OUT/48a_summary.txt
cat $OUT/48a_summary.txt
