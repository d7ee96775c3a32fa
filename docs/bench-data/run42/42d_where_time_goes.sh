#!/bin/bash
# Run 42d (session 35): where the fused MLP's and attention_decode's time goes, by timing-only variants (their
# results are wrong; not tests): trees in .abX/VARIANT (the shaders carried, edited as the BENCHMARKS entry says;
# lua, recipes and models linked to the tree's here) run by the same binary through DOPPLER_HOME:
#   nodown      gemv_q's DP_DOWN loop takes one output of one thread (h still made: nothing else is dropped)
#   nogu        gemv_q's gate+up loop runs no unit (staging, reduction, h and down kept)
#   noprenorm   gemv_q stages x as it is (stage_x8) instead of the folded norm_add_norm
#   noprologue  attention_decode without its rope/q-k-norm/append prologue (a barrier in its place)
#   nomerge     attention_decode's workgroups return after storing their partials (no counter, no merge)
# One profiled decode process per variant and model (per-kernel GPU ms per token), then two unprofiled.
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/42d_gpu.txt 2>&1
for v in nodown nogu noprenorm noprologue nomerge; do for d in lua recipes models; do ln -sfn $PWD/$d .abX/$v/$d; done; done
for m in gemma-q4_k_m llama-q4_k_m; do
  path=$(model $m)
  for pass in p 1 2; do
    for v in base nodown nogu noprenorm noprologue nomerge; do
      home=$PWD; [ $v != base ] && home=$PWD/.abX/$v
      extra=; [ $pass != p ] && extra=--no-profile
      DOPPLER_HOME=$home DOPPLER_CACHE_DIR=/tmp/dpc-$v timeout 120 $B recipes/bench/decode.lua --model $path \
        --prompt-tokens 32 --tokens 128 --runs 1 $extra --label "$m $v $pass" >> $OUT/42d_decode.jsonl 2>> $OUT/42d_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/42d_summary.txt <<'PY'
import json, sys, collections
tok = collections.defaultdict(list); prof = {}
for l in open(sys.argv[1] + "/42d_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, v, p = d["label"].split()
    tok[(m, v)].append("%.1f/%d" % (d["decode_tok_s"], d["decode_tokens"]))
    if p == "p": prof[(m, v)] = d.get("gpu_ms_per_kernel", {})
for k, v in tok.items():
    a = prof.get(k, {})
    print("%-13s %-11s tok/s %-30s | %s" % (k[0], k[1], " ".join(v), " ".join("%s %.4f" % (n, t) for n, t in sorted(a.items()))))
PY
cat $OUT/42d_summary.txt
