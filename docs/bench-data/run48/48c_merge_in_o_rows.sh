#!/bin/bash
# Run 48c (session 41): 48a's merge in o's input loads with fewer, wider o workgroups. In 48a o's gemv took one
# row per workgroup (lower.lua's LINEAR_ROWS_GPU), so every one of its 1,152 (Gemma) / 2,048 (Llama) workgroups
# read all the partials; with R rows per workgroup (hint gemv_rows) that traffic shrinks R-fold. Variants
# (timing-only trees of 48a, .abX/VARIANT, edits in 48a_variants.diff; results wrong; not tests), as NAME=TREE+HINT:
#   base            the engine                      r8     the engine, gemv_rows=8
#   nomerge         attention without its merge     mo10r4 / mo10r8 / mo20r8   48a's mo10 at 4 / 8 rows, mo20 at 8 (the hint allows 1, 2, 4, 8)
# Gemma 3 1B and Llama 3.2 1B Q4_K_M (o is their only float gemv in a decode step: the hint touches only o),
# 4 rounds of fresh processes that alternate, one profiled process per variant first.
# On the lent GPU machine (.abX carried): bash docs/bench-data/run48/48c_merge_in_o_rows.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
t0=$(date +%s)
for v in nomerge mo20 mo10; do for d in lua recipes models; do ln -sfn $PWD/$d .abX/$v/$d; done; done
GQ=$(model gemma-q4_k_m); LQ=$(model llama-q4_k_m)
echo "models $(( $(date +%s) - t0 )) s" >> $OUT/48c_summary.txt
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2"
run() {  # pass model variant
  local pass=$1 m=$2 v=$3 home=$PWD extra=--no-profile tree hint=
  case $v in
    base) tree= ;; r8) tree= hint="--hint gemv_rows=8" ;; nomerge) tree=nomerge ;;
    mo10r8) tree=mo10 hint="--hint gemv_rows=8" ;; mo10r4) tree=mo10 hint="--hint gemv_rows=4" ;;
    mo20r8) tree=mo20 hint="--hint gemv_rows=8" ;;
  esac
  [ -n "$tree" ] && home=$PWD/.abX/$tree
  [ $pass = p ] && extra=
  DOPPLER_HOME=$home DOPPLER_CACHE_DIR=/tmp/dpc-${tree:-base} timeout 60 $B $D $extra $hint --model $m \
    --label "$(basename $m) $v $pass" >> $OUT/48c_decode.jsonl 2>> $OUT/48c_err.txt
}
for m in $GQ $LQ; do for v in base r8 nomerge mo10r4 mo10r8 mo20r8; do run p $m $v; done; done
for i in 1 2 3 4; do for m in $GQ $LQ; do for v in base r8 nomerge mo10r4 mo10r8 mo20r8; do run $i $m $v; done; done; done
python3 - "$OUT" >> $OUT/48c_summary.txt <<'PY'
import json, sys, collections, statistics
tok = collections.defaultdict(list); prof = {}
for l in open(sys.argv[1] + "/48c_decode.jsonl"):
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
echo "total $(( $(date +%s) - t0 )) s" >> $OUT/48c_summary.txt
cat $OUT/48c_summary.txt
