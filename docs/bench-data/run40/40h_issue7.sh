#!/bin/bash
# Run 40h (session 33): the issue-7 stage as h100-bench.sh now runs it (decode: three processes of one timed run
# each, after 40g), at the session's code. On the lent GPU machine: bash docs/bench-data/run40/40h_issue7.sh
. scripts/device/env.sh
STAGES=issue7 bash scripts/device/h100-bench.sh > $OUT/40h_issue7_run.txt 2>&1
tail -12 $OUT/40h_issue7_run.txt
