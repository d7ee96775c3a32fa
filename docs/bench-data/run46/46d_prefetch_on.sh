#!/bin/bash
# Run 46d (session 39): 46c tied the bimodal decode of Gemma 3 1B F16 with glu_down=on to the side prefetcher
# (with it: ~747 tok/s in 2 of 6 processes, ~707 in 4; without it: 722 in all 6; the default, glu_down=auto with
# the prefetcher, 721). The fused MLP is one stage of 47.8 MB (gate, up, down's columns: three 15.9 MB ranges),
# over the prefetcher's 24 MiB limit for reading ahead from a light stage, so its reads start when the stage
# before it (o) begins. Does a schedule that starts them earlier (max_mb 48 or 64: from attention, a light
# stage; depth 2), or more side workgroups, make the fast mode steady? 5 fresh processes of 2 runs each.
# On the lent GPU machine: bash docs/bench-data/run46/46d_prefetch_on.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
t0=$(date +%s)
G16=$(model gemma)
D="recipes/bench/decode.lua --model $G16 --prompt-tokens 32 --tokens 128 --runs 2 --no-profile"
for i in 1 2 3 4 5; do
  for h in "glu_down=auto" "glu_down=on" "glu_down=on prefetch_max_mb=48" "glu_down=on prefetch_max_mb=64" \
           "glu_down=on prefetch_depth=2" "glu_down=on prefetch_groups=64"; do
    hs=""; for kv in $h; do hs="$hs --hint $kv"; done
    timeout 60 $B $D $hs --label "$h" >> $OUT/46d_ab.jsonl 2>> $OUT/46d_err.txt
  done
done
python3 - "$OUT/46d_ab.jsonl" > $OUT/46d_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in g.items():
    procs = ["%.1f/%.1f" % (v[i], v[i + 1]) for i in range(0, len(v) - 1, 2)]
    print("%-34s n=%d median %.1f min %.1f max %.1f | %s" % (k, len(v), statistics.median(v), min(v), max(v), " ".join(procs)))
PY
echo "total $(( $(date +%s) - t0 )) s" >> $OUT/46d_summary.txt
cat $OUT/46d_summary.txt; tail -3 $OUT/46d_err.txt
