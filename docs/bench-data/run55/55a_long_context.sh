#!/bin/bash
# Run 55a (session 48): doppler's decode against the context it runs at. Every earlier issue-7 figure is at a
# 32-token prompt; attention_decode's rule (chunks, keys per round) was set there and checked at 2048 tokens only
# (session 14, 21c/21e). Here: Gemma 3 1B and Llama 3.2 1B Q4_K_M (synthetic, `doppler convert --quant q4_k_m`),
# 128 new tokens after prompts of 32, 1024, 3900 (the default context, 4096) and 16000 tokens (hint
# context=16384). The defaults first: one profiled process, and a second, unprofiled, at the long prompts. Then,
# at the two long prompts, the attention hints a long context may want, one process each: attention_splits=64
# (Llama's auto is 256 / 8 kv heads = 32; Gemma's is already 64) and attention_unroll=2 and 4 (keys per cluster
# per round; auto 1). Llama runs first; Gemma only while LIMIT leaves 200 s.
# On the lent GPU machine: LIMIT=560 bash docs/bench-data/run55/55a_long_context.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
T0=$(date +%s)
LIMIT=${LIMIT:-560}
left() { [ $(( $(date +%s) - T0 )) -lt $(( LIMIT - $1 )) ]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/55a_gpu.txt 2>&1
run() {   # run LABEL MODEL-PATH PROMPT [decode.lua options...]
  local lab=$1 path=$2 pt=$3; shift 3
  local ctx=(); [ $pt -gt 4000 ] && ctx=(--hint context=16384)
  timeout 90 $B recipes/bench/decode.lua --model $path --prompt-tokens $pt --tokens 128 --runs 2 \
    "${ctx[@]}" "$@" --label "$lab" >> $OUT/55a_decode.jsonl 2>>$OUT/55a_err.txt
  echo "$lab rc=$? $(( $(date +%s) - T0 )) s" >> $OUT/55a_log.txt
}
# Llama first (every layer global, 8 kv heads: the most keys per token), then Gemma while LIMIT allows
for m in llama-q4_k_m gemma-q4_k_m; do
  left 200 || break
  path=$(model $m)
  echo "$m made $(( $(date +%s) - T0 )) s" >> $OUT/55a_log.txt
  for pt in 32 1024 3900 16000; do
    left 40 || break
    run "$m/p$pt/auto" $path $pt
    [ $pt -ge 3900 ] && run "$m/p$pt/auto-2" $path $pt --no-profile
  done
  for pt in 16000 3900; do
    for h in attention_splits=64 attention_unroll=2 attention_unroll=4; do
      [ $m = gemma-q4_k_m ] && [ $h = attention_splits=64 ] && continue
      left 30 || break
      run "$m/p$pt/$h" $path $pt --no-profile --hint $h
    done
  done
done
python3 - $OUT/55a_decode.jsonl > $OUT/55a_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.OrderedDict()
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    g.setdefault(d["label"], []).append(d)
for lab, ds in g.items():
    k = {}
    for d in ds:
        if d.get("gpu_ms_per_kernel"): k = d["gpu_ms_per_kernel"]
    print("%-40s decode %s tok/s  p50 %s ms  %s" % (lab, " ".join("%.1f" % d["decode_tok_s"] for d in ds),
          " ".join("%.4f" % d["p50_ms"] for d in ds),
          " ".join("%s=%.4f" % kv for kv in sorted(k.items(), key=lambda kv: -kv[1])[:5])))
PY
echo "total $(( $(date +%s) - T0 )) s" >> $OUT/55a_log.txt
cat $OUT/55a_gpu.txt $OUT/55a_summary.txt $OUT/55a_log.txt; tail -5 $OUT/55a_err.txt
