#!/usr/bin/env bash
# Run 37j (session 30), nvidia-h100-x1: is the side prefetcher (session 20, 27f: decode 1.02-1.036x then) still worth
# its default after the fused MLP and the norm folds? Defaults against --hint side_prefetch=off, three rounds of
# 2 runs, Gemma 3 1B and Llama 3.2 1B at Q4_K_M and F16. The first script written on scripts/device/env.sh.
set -u
T0=$(date +%s)
. scripts/device/env.sh
for m in gemma gemma-q4_k_m llama llama-q4_k_m; do model $m >/dev/null; done
echo "models ready $(( $(date +%s) - T0 )) s"
dec() {  # label model args...
  local label=$1 m=$2; shift 2
  timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 "$@" >>"$OUT/37j_decode.jsonl" 2>>"$OUT/37j_err.txt"
}
for round in 1 2 3; do
  for m in $(model gemma-q4_k_m) $(model llama-q4_k_m) $(model gemma) $(model llama); do
    dec auto $m --runs 2 --no-profile
    dec off $m --runs 2 --no-profile --hint side_prefetch=off
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
python3 - "$OUT/37j_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        p50[(d["model"].split("/")[-1][:14], d["label"])].append((d["p50_ms"], d["decode_tok_s"]))
for key, v in p50.items():
    print("%-16s %-5s p50 %s  tok/s %s" % (key[0], key[1], " ".join("%.4f" % x[0] for x in v), " ".join("%.1f" % x[1] for x in v)))
PY
tail -3 "$OUT/37j_err.txt"
echo "done $(( $(date +%s) - T0 )) s"
