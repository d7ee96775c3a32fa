#!/bin/bash
# Run 54b (session 47): what the probe's quantised steps (--weights q4_k_m) are sensitive to, GEMVs alone,
# dispatch and persistent modes: as 54a; without the folded norms; workgroups of 512 (264) and 256 (528); one
# chunk in flight per lane; without the head; one round.
# On the lent GPU machine: bash docs/bench-data/run54/54b_probe_sweep.sh
. scripts/device/env.sh
P="$B recipes/bench/persistent.lua --weights q4_k_m --tokens 32 --runs 5 --no-attention"
for shape in gemma llama; do
  $P --shape $shape --label base
  $P --shape $shape --no-norm --label no-norm
  $P --shape $shape --no-head --label no-head
  $P --shape $shape --un 1 --label un1
  $P --shape $shape --wg 512 --groups 264 --label wg512
  $P --shape $shape --wg 256 --groups 528 --label wg256
done > $OUT/54b_probe.jsonl 2> $OUT/54b_err.txt
python3 - $OUT/54b_probe.jsonl <<'PY' | tee $OUT/54b_summary.txt
import json, sys
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    print("%-8s %-6s %-10s %4dx%-4d un=%d %8.4f ms/token %7.1f GB/s %6.2f us/step" % (d["label"], d["shape"],
          d["mode"], d["groups"], d["wg"], d["un"], d["ms_per_token"], d["gb_s"], d["us_per_step"]))
PY
tail -3 $OUT/54b_err.txt
