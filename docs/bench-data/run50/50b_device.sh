#!/bin/bash
# Run 50b (session 43): the split of lua/lib/doppler/lower.lua into lower/*.lua on the lent GPU, where the
# lowering takes paths lavapipe never does (gemm_cm and attention on cooperative matrices, int8 x by default,
# the fused MLP, the side prefetcher, the LM head's queue).
#   PHASE=fp:    50a_plan_fingerprint.sh on the fixture models, OLD = .old50 (the lowering rules of ae058c8, the
#                commit before the split, with this tree's shaders: their comments alone differ), NEW = this tree;
#                then the Lua tests of the rules that differ on a GPU
#   PHASE=bench: the synthetic Gemma 3 1B and Llama 3.2 1B Q4_K_M models: their plans by both trees, then
#                decode.lua (32-token prompt, 128 tokens) in fresh processes, one profiled, alternating: the old
#                tree, this tree, and this tree with hint prefetch_groups=16 (sessions 30 and 37 measured Gemma 3
#                1B Q4_K_M 1.02-1.05x faster with it, Gemma F16 5 % slower: is it a default for quantised MLPs?)
# On the lent GPU machine: PHASE=fp bash docs/bench-data/run50/50b_device.sh; then PHASE=bench.
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
T0=$(date +%s)
OLD=$PWD/.old50
S=$OUT/50b_summary_${PHASE}.txt
F=$DOPPLER_FIXTURES
if [ "$PHASE" = fp ]; then
  MODELS="$F/models/gemma3-tiny $F/models/llama3-tiny $F/models/mixtral-tiny $F/models/qwen3-tiny $F/models/phi3-tiny
          $F/gguf/gemma3-q/model-Q4_K_M.gguf $F/gguf/llama-q/model-Q4_K_M.gguf" \
    SETS="0 1 2 4 5 7 8 12 13" OLD=$OLD OUTD=$OUT/50b_fp DOPPLER_BIN=$B \
    timeout 300 bash docs/bench-data/run50/50a_plan_fingerprint.sh > $OUT/50b_fp.txt 2>&1
  echo "fingerprint rc $? after $(( $(date +%s) - T0 )) s: $(tail -3 $OUT/50b_fp.txt | tr '\n' ' ')" >> $S
  mkdir -p $OUT/50b_tests
  for t in fuse_attn glu_down lm_head_fusion gemv_q8 gguf_fixtures gpu_loop gemm_cm attention_cm norm_gate_up \
           side_prefetch quant_linear embed_norm gemma3_fixtures families_fixtures attention_long fusion_plugin; do
    [ $(( $(date +%s) - T0 )) -gt 540 ] && { echo "test_$t not run (time)" >> $S; continue; }
    timeout 120 $B tests/lua/test_$t.lua > $OUT/50b_tests/test_$t.txt 2>&1
    echo "test_$t rc $?: $(tail -1 $OUT/50b_tests/test_$t.txt)" >> $S
  done
fi
if [ "$PHASE" = bench ]; then
  G4=$(model gemma-q4_k_m); L4=$(model llama-q4_k_m)
  echo "models $(( $(date +%s) - T0 )) s" >> $S
  MODELS="$G4 $L4" SETS="0" OLD=$OLD OUTD=$OUT/50b_fp_big DOPPLER_BIN=$B \
    timeout 120 bash docs/bench-data/run50/50a_plan_fingerprint.sh > $OUT/50b_fp_big.txt 2>&1
  echo "fingerprint rc $?: $(tail -3 $OUT/50b_fp_big.txt | tr '\n' ' ')" >> $S
  D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2"
  run() {  # pass variant model
    local extra=--no-profile home=$PWD
    [ $1 = p ] && extra=
    [ $2 = old ] && home=$OLD
    [ $2 = pg16 ] && extra="$extra --hint prefetch_groups=16"
    DOPPLER_HOME=$home timeout 60 $B $D $extra --model $3 --label "$(basename $3) $2 $1" \
      >> $OUT/50b_decode.jsonl 2>> $OUT/50b_err.txt
  }
  for m in $G4 $L4; do for tr in old new pg16; do run p $tr $m; done; done
  for i in 1 2; do for m in $G4 $L4; do for tr in old new pg16; do
    [ $(( $(date +%s) - T0 )) -gt 540 ] && continue
    run $i $tr $m
  done; done; done
  python3 - "$OUT" >> $S <<'PY'
import json, sys, collections, statistics
tok = collections.defaultdict(list); prof = {}
for l in open(sys.argv[1] + "/50b_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, tr, p = d["label"].split()
    if p == "p": prof[(m, tr)] = (d["decode_tok_s"], d.get("gpu_ms_per_kernel") or {})
    else: tok[(m, tr)].extend([d["decode_tok_s"]])
for k in sorted(tok):
    v = tok[k]
    print("%-16s %-4s median %.1f  min %.1f  max %.1f  n %d" % (k[0], k[1], statistics.median(v), min(v), max(v), len(v)))
for k in sorted(prof):
    t, a = prof[k]
    print("profile %-16s %-4s %.1f | %s" % (k[0], k[1], t, " ".join("%s %.4f" % (n, x) for n, x in sorted(a.items()))))
PY
fi
echo "total $(( $(date +%s) - T0 )) s" >> $S
cat $S
