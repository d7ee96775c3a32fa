#!/bin/bash
# Run 42j (session 35): attention_decode's chunk merge with the per-head weights taken by a subgroup's lanes
# (subgroupMax / subgroupAdd) instead of one invocation walking the chunks: 42j_merge_lanes_experiment.diff,
# applied to the tree to run this (not committed: no gain). The tree with it (new) against .abX/old
# (the shaders at 57fc08f, attention_decode.comp as before the change; lua, recipes, models linked), same binary,
# DOPPLER_HOME; Gemma 3 1B and Llama 3.2 1B Q4_K_M: one profiled process per side, then 3 unprofiled per side,
# alternating; then test_fuse_attn and test_gpu_loop on the H100 with the new kernel.
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/42j_gpu.txt 2>&1
for d in lua recipes models; do ln -sfn $PWD/$d .abX/old/$d; done
for m in gemma-q4_k_m llama-q4_k_m; do
  path=$(model $m)
  for pass in p 1 2 3; do
    for side in old new; do
      home=$PWD; [ $side = old ] && home=$PWD/.abX/old
      extra=; [ $pass != p ] && extra=--no-profile
      DOPPLER_HOME=$home DOPPLER_CACHE_DIR=/tmp/dpc-$side timeout 120 $B recipes/bench/decode.lua --model $path \
        --prompt-tokens 32 --tokens 128 --runs 1 $extra --label "$m $side $pass" >> $OUT/42j_decode.jsonl 2>> $OUT/42j_err.txt
    done
  done
done
for t in fuse_attn gpu_loop; do timeout 200 $B tests/lua/test_$t.lua > $OUT/42j_h100_t_$t.txt 2>&1; echo "test_$t rc=$?" >> $OUT/42j_summary.txt; done
python3 - "$OUT" >> $OUT/42j_summary.txt <<'PY'
import json, sys, collections, statistics
tok = collections.defaultdict(list); prof = {}
for l in open(sys.argv[1] + "/42j_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, side, p = d["label"].split()
    if p == "p": prof[(m, side)] = d.get("gpu_ms_per_kernel", {}).get("attention_decode", 0)
    else: tok[(m, side)].append(d["decode_tok_s"])
for k in sorted(tok):
    v = tok[k]
    print("%-13s %-4s median %.1f (%s) | attention_decode %.4f ms per token" % (k[0], k[1], statistics.median(v),
          " ".join("%.1f" % x for x in v), prof.get(k, 0)))
PY
cat $OUT/42j_summary.txt
