#!/bin/bash
# Run 46e (session 39): 46e_reload.lua (its header says what) in 4 fresh processes, Gemma 3 1B F16 with
# glu_down=on (the bimodal case) and 2 with the default (glu_down=auto).
# On the lent GPU machine: bash docs/bench-data/run46/46e_reload.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
t0=$(date +%s)
G16=$(model gemma)
for i in 1 2 3 4; do
  timeout 100 $B docs/bench-data/run46/46e_reload.lua --model $G16 --hint glu_down=on --label "on p$i" >> $OUT/46e_reload.jsonl 2>> $OUT/46e_err.txt
  [ $i -le 2 ] && timeout 100 $B docs/bench-data/run46/46e_reload.lua --model $G16 --label "auto p$i" >> $OUT/46e_reload.jsonl 2>> $OUT/46e_err.txt
done
python3 - "$OUT/46e_reload.jsonl" > $OUT/46e_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    print("%-8s session %d  %s | after a new recording %s" % (d["label"], d["session"],
          " ".join("%.1f" % x for x in d["tok_s"]), " ".join("%.1f" % x for x in d["after_new_recording"])))
PY
echo "total $(( $(date +%s) - t0 )) s" >> $OUT/46e_summary.txt
cat $OUT/46e_summary.txt; tail -5 $OUT/46e_err.txt
