#!/usr/bin/env bash
# Run 37k (session 30), nvidia-h100-x1: after 37j (the side prefetcher costs Gemma 3 1B Q4_K_M ~2 % and gives the
# other three models 1-5 %), its knobs on both Q4_K_M models: side kernel workgroups (prefetch_groups 16 / 64,
# default 32), the largest range read ahead (prefetch_max_mb 8, default 24) and the smallest (prefetch_min_kb
# 1024, default 256), against auto and off; two rounds of 2 runs.
set -u
T0=$(date +%s)
. scripts/device/env.sh
for m in gemma-q4_k_m llama-q4_k_m; do model $m >/dev/null; done
echo "models ready $(( $(date +%s) - T0 )) s"
dec() {  # label model args...
  local label=$1 m=$2; shift 2
  timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 "$@" >>"$OUT/37k_decode.jsonl" 2>>"$OUT/37k_err.txt"
}
for round in 1 2; do
  for m in $(model gemma-q4_k_m) $(model llama-q4_k_m); do
    dec auto $m --runs 2 --no-profile
    dec off $m --runs 2 --no-profile --hint side_prefetch=off
    dec g16 $m --runs 2 --no-profile --hint prefetch_groups=16
    dec g64 $m --runs 2 --no-profile --hint prefetch_groups=64
    dec max8 $m --runs 2 --no-profile --hint prefetch_max_mb=8
    dec min1024 $m --runs 2 --no-profile --hint prefetch_min_kb=1024
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
python3 - "$OUT/37k_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        p50[(d["model"].split("/")[-1][:14], d["label"])].append((d["p50_ms"], d["decode_tok_s"]))
for key, v in p50.items():
    print("%-16s %-8s p50 %s  tok/s %s" % (key[0], key[1], " ".join("%.4f" % x[0] for x in v), " ".join("%.1f" % x[1] for x in v)))
PY
tail -3 "$OUT/37k_err.txt"
echo "done $(( $(date +%s) - T0 )) s"
