#!/bin/bash
# Run 45a (session 38): the lent GPU machine is now an H200 (the H100 kind is no longer lent). What this device
# is (name, driver, clocks), its copy bandwidth and the cost of a dependent step (the persistent probe's empty
# steps, 132 x 1024 as 44d), the issue-7 stage as run 43e ran it on the H100, and the tests that check the
# GPU loop and the quantised paths on this GPU.
# On the lent GPU machine: bash docs/bench-data/run45/45a_h200_baseline.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv > $OUT/45a_gpu.txt 2>&1
timeout 60 $B recipes/bench/copy_bandwidth.lua --label bw >> $OUT/45a_probe.jsonl 2>> $OUT/45a_err.txt
timeout 120 $B recipes/bench/persistent.lua --shape gemma --tokens 16 --runs 3 --modes sync --groups 132 --wg 1024 \
  --label "sync 132 x 1024" >> $OUT/45a_probe.jsonl 2>> $OUT/45a_err.txt
OUT=$OUT/issue7 STAGES=issue7 bash scripts/device/h100-bench.sh > $OUT/45a_issue7_run.txt 2>&1
cp $OUT/issue7/issue7.jsonl $OUT/45a_issue7.jsonl; cat $OUT/issue7/err.txt $OUT/issue7/convert.txt >> $OUT/45a_err.txt 2>/dev/null
rm -rf $OUT/issue7
for t in gpu_loop gguf_fixtures side_prefetch; do
  timeout 300 $B tests/lua/test_$t.lua > /tmp/t_$t.txt 2>&1
  echo "test_$t rc=$? $(tail -1 /tmp/t_$t.txt)" >> $OUT/45a_tests.txt
done
cat $OUT/45a_gpu.txt $OUT/45a_tests.txt; cat $OUT/45a_issue7_run.txt | tail -32
python3 - "$OUT/45a_probe.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    print({k: d[k] for k in d if k in ("label", "mode", "gb_s", "gpu_gb_s", "wall_gb_s", "us_per_step", "groups", "wg")})
PY
