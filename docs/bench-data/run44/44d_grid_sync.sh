#!/bin/bash
# Run 44d (session 37): what a grid barrier costs with more, smaller workgroups (the persistent probe's empty steps,
# --modes sync, at 132 x 1024 as sessions 21 and 25 ran it, and at 264 x 512, 528 x 256, 1056 x 128, the sizes
# doppler's decode kernels use), and the Gemma-shaped 4-bit chain at the first three.
# On the lent GPU machine: bash docs/bench-data/run44/44d_grid_sync.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
P="$B recipes/bench/persistent.lua --shape gemma --tokens 16 --runs 3"
for gw in 132:1024 264:512 528:256 1056:128; do
  g=${gw%:*} w=${gw#*:}
  timeout 120 $P --modes sync --groups $g --wg $w --label "sync $g x $w" >> $OUT/44d_probe.jsonl 2>> $OUT/44d_err.txt
  echo "sync $g x $w rc=$?"
done
for gw in 132:1024 264:512 528:256; do
  g=${gw%:*} w=${gw#*:}
  timeout 120 $P --weights q4 --modes dispatch,persistent --groups $g --wg $w --label "chain $g x $w" \
    >> $OUT/44d_probe.jsonl 2>> $OUT/44d_err.txt
  echo "chain $g x $w rc=$?"
done
python3 - "$OUT" > $OUT/44d_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1] + "/44d_probe.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    print("%-18s %-16s groups %5d wg %5d  us/step %7.2f  ms/token %.4f  same_bits %s" % (d["label"], d["mode"],
          d["groups"], d["wg"], d["us_per_step"], d["ms_per_token"], d.get("same_bits")))
PY
cat $OUT/44d_summary.txt
tail -5 $OUT/44d_err.txt
