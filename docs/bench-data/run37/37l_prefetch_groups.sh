#!/usr/bin/env bash
# Run 37l (session 30), nvidia-h100-x1, on 37k's machine still warm: the side kernel's workgroups (prefetch_groups)
# 8 and 16 against the default 32, three rounds of 2 runs, all four models.
set -u
T0=$(date +%s)
. scripts/device/env.sh
dec() {  # label model args...
  local label=$1 m=$2; shift 2
  timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 "$@" >>"$OUT/37l_decode.jsonl" 2>>"$OUT/37l_err.txt"
}
for round in 1 2 3; do
  for m in $(model gemma-q4_k_m) $(model llama-q4_k_m) $(model gemma) $(model llama); do
    dec auto $m --runs 2 --no-profile
    dec g16 $m --runs 2 --no-profile --hint prefetch_groups=16
    dec g8 $m --runs 2 --no-profile --hint prefetch_groups=8
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
python3 - "$OUT/37l_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        p50[(d["model"].split("/")[-1][:14], d["label"])].append((d["p50_ms"], d["decode_tok_s"]))
for key, v in p50.items():
    print("%-16s %-5s p50 %s  tok/s %s" % (key[0], key[1], " ".join("%.4f" % x[0] for x in v), " ".join("%.1f" % x[1] for x in v)))
PY
echo "done $(( $(date +%s) - T0 )) s"
