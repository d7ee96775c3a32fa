#!/bin/bash
# Run 40c (session 33): the issue-7 stage (docs/BENCHMARKS.md's table) at the session's code, on the machine 40b used.
# On the lent GPU machine: bash docs/bench-data/run40/40c_issue7.sh
. scripts/device/env.sh
STAGES=issue7 bash scripts/device/h100-bench.sh > $OUT/40c_issue7_run.txt 2>&1
tail -12 $OUT/40c_issue7_run.txt
