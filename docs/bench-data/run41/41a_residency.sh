#!/bin/bash
# Run 41a (session 34): does the side prefetcher's resident workgroup cost the LM head a wave? Registers of the
# decode kernels (DOPPLER_KERNEL_STATS=1), then per-kernel GPU time (--profile, one process per setting) and
# decode tok/s (3 fresh processes per setting, no profile) for Gemma 3 1B Q4_K_M and Llama 3.2 1B Q4_K_M with:
# the defaults; prefetch_groups=16; side_prefetch=off; the side kernel's workgroup at 64 and 128 invocations
# (hint prefetch_wg); the head's workgroups at 1056 (132 x 8) and 2048. On the lent GPU machine:
# bash docs/bench-data/run41/41a_residency.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/41a_gpu.txt 2>&1
SETS="none prefetch_groups=16 side_prefetch=off prefetch_wg=64 prefetch_wg=128 lm_head_groups=1056 lm_head_groups=2048"
for m in gemma-q4_k_m llama-q4_k_m; do
  path=$(model $m)
  DOPPLER_KERNEL_STATS=1 $B run --model $path --ids 2,10,20 --max-tokens 16 > /dev/null 2> $OUT/41a_stats_$m.txt
  for h in $SETS; do
    hh=; [ $h != none ] && hh="--hint $h"
    $B recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 1 $hh \
      --label "$m $h p" >> $OUT/41a_profile.jsonl 2>> $OUT/41a_err.txt
  done
  for i in 1 2 3; do
    for h in $SETS; do
      hh=; [ $h != none ] && hh="--hint $h"
      $B recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 1 --no-profile $hh \
        --label "$m $h $i" >> $OUT/41a_decode.jsonl 2>> $OUT/41a_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/41a_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/41a_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, h, i = d["label"].split()
    g[(m, h)].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-14s %-22s n=%d median %.1f min %.1f max %.1f | %s" % (k[0], k[1], len(v), statistics.median(v), min(v),
          max(v), " ".join("%.1f" % x for x in v)))
for l in open(sys.argv[1] + "/41a_profile.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    k = d["gpu_ms_per_kernel"]
    print("%-36s %.1f tok/s gpu %.4f | %s" % (d["label"], d["decode_tok_s"], d["gpu_ms_per_token"],
          " ".join("%s %.4f" % (n, k[n]) for n in sorted(k))))
PY
cat $OUT/41a_summary.txt
grep -h -i "prefetch\|lm_head\|gemv_q\|attention_decode\|gemv_multi" $OUT/41a_stats_*.txt | head -40
