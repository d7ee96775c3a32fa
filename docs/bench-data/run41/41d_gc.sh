#!/bin/bash
# Run 41d (session 34): the collector's mode (41d_gc.lua: gen, the engine's now, against inc) over fresh
# processes, alternating: decode (Gemma 3 1B Q4_K_M, Llama 3.2 1B Q4_K_M; 3 processes of one run each) and
# 512-token prefill (Gemma Q4_K_M and F16; 2 processes of 3 runs each). On the lent GPU machine, after 41c
# (its models): bash docs/bench-data/run41/41d_gc.sh
. scripts/device/env.sh
for i in 1 2 3; do
  for m in gemma-q4_k_m llama-q4_k_m; do
    for gc in gen inc; do
      $B docs/bench-data/run41/41d_gc.lua $gc decode --model $(model $m) --prompt-tokens 32 --tokens 128 --runs 1 \
        --no-profile --label "$m $gc $i" >> $OUT/41d_gc.jsonl 2>> $OUT/41d_err.txt
    done
  done
done
for i in 1 2; do
  for m in gemma-q4_k_m gemma; do
    for gc in gen inc; do
      $B docs/bench-data/run41/41d_gc.lua $gc prefill --model $(model $m) --no-profile --label "$m $gc $i" \
        >> $OUT/41d_gc.jsonl 2>> $OUT/41d_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/41d_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/41d_gc.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, gc, i = d["label"].split()
    key = "decode_tok_s" if d["mode"] == "decode" else "prefill_tok_s"
    g[(d["mode"], m, gc)].append(d[key])
for k, v in sorted(g.items()):
    print("%-8s %-14s %-4s n=%d median %.1f min %.1f max %.1f | %s" % (k[0], k[1], k[2], len(v), statistics.median(v),
          min(v), max(v), " ".join("%.1f" % x for x in v)))
PY
cat $OUT/41d_summary.txt
