#!/bin/bash
# Run 49a (session 42): the quantised LM head with each subgroup taking its own rows from the queue and no
# barrier between row blocks (hint lm_head_queue=subgroup, lm_head_q.comp's DP_LMH_SGQ) against the engine's
# workgroup queue (auto = on). Bit for bit the same logits (test_lm_head_fusion runs it here); the question is
# the head's time: at Gemma 3 1B's Q8_0 head ~2.45 TB/s and Llama 3.2 1B's Q6_K head ~1.5 TB/s (48a profiles),
# two barriers per row block keep a workgroup's subgroups in step. Also runs test_attention_long (session 42's
# CPU-device bounds leave a GPU's kernels as they were; the cases check them here).
# One call: models, one profiled process per setting, then 3 rounds of fresh processes that alternate; with
# TESTS=1 first test_lm_head_fusion and test_attention_long on the GPU; MODELS=llama (or gemma) for one model.
# On the lent GPU machine, with 49a_head_subgroup_experiment.diff applied to the working tree:
#   [TESTS=1] [MODELS=llama] bash docs/bench-data/run49/49a_head_subgroup.sh
# Ran on the nvidia-h100-x1 (README): Llama 1.005x, Gemma 0.974x; not built.
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
t0=$(date +%s)
MS=""   # MODELS="gemma llama" (default) or one of them
for f in ${MODELS:-gemma llama}; do MS="$MS $(model $f-q4_k_m)"; done
echo "models $(( $(date +%s) - t0 )) s" >> $OUT/49a_summary.txt
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2"
run() {  # pass model setting
  local pass=$1 m=$2 v=$3 extra=--no-profile
  [ $pass = p ] && extra=
  timeout 60 $B $D $extra --model $m --hint lm_head_queue=$v \
    --label "$(basename $m) $v $pass" >> $OUT/49a_decode.jsonl 2>> $OUT/49a_err.txt
}
if [ "${TESTS:-0}" = 1 ]; then
  for t in test_lm_head_fusion test_attention_long; do
    timeout 240 $B tests/lua/$t.lua > $OUT/49a_$t.txt 2>&1; echo "$t rc $?" >> $OUT/49a_summary.txt
    tail -1 $OUT/49a_$t.txt >> $OUT/49a_summary.txt
  done
fi
for m in $MS; do for v in on subgroup; do run p $m $v; done; done
for i in 1 2 3; do for m in $MS; do for v in on subgroup; do run $i $m $v; done; done; done
python3 - "$OUT" >> $OUT/49a_summary.txt <<'PY'
import json, sys, collections, statistics
tok = collections.defaultdict(list); prof = {}
for l in open(sys.argv[1] + "/49a_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, v, p = d["label"].split()
    if p == "p": prof[(m, v)] = (d["decode_tok_s"], d.get("gpu_ms_per_kernel") or {})
    else: tok[(m, v)].append(d["decode_tok_s"])
for k in sorted(tok):
    v = tok[k]
    print("%-16s %-9s median %.1f  min %.1f  max %.1f  n %d" % (k[0], k[1], statistics.median(v), min(v), max(v), len(v)))
for k in sorted(prof):
    t, a = prof[k]
    print("profile %-16s %-9s %.1f | %s" % (k[0], k[1], t, " ".join("%s %.4f" % (n, x) for n, x in sorted(a.items()))))
PY
echo "total $(( $(date +%s) - t0 )) s" >> $OUT/49a_summary.txt
cat $OUT/49a_summary.txt
