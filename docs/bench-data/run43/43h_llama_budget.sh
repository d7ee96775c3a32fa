#!/bin/bash
# Run 43h (session 36): Llama 3.2 1B Q4_K_M's fused MLP (28-32 MB a layer) is over prefetch_lead's 24 MiB budget,
# so its reads still start only at o; with prefetch_max_mb=48 they start at attention (lead 2). Against the
# defaults, with 48 side workgroups too; alternating fresh processes. On the lent GPU machine:
# bash docs/bench-data/run43/43h_llama_budget.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/43h_gpu.txt 2>&1
M=$(model llama-q4_k_m)
for i in 1 2 3 4; do
  for v in default max48 max48_g48; do
    hs=(--hint side_prefetch=auto)
    [ $v = max48 ] && hs=(--hint prefetch_max_mb=48)
    [ $v = max48_g48 ] && hs=(--hint prefetch_max_mb=48 --hint prefetch_groups=48)
    $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --no-profile "${hs[@]}" \
      --label "$v" >> $OUT/43h_decode.jsonl 2>> $OUT/43h_err.txt
  done
done
$B docs/bench-data/run43/43d_led.lua --model $M --hint prefetch_max_mb=48 >> $OUT/43h_led.jsonl 2>> $OUT/43h_err.txt
python3 - "$OUT" > $OUT/43h_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/43h_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-12s n=%d median %.1f min %.1f max %.1f | %s" % (k, len(v), statistics.median(v), min(v), max(v),
          " ".join("%.1f" % x for x in v)))
PY
cat $OUT/43h_summary.txt $OUT/43h_led.jsonl
