#!/usr/bin/env bash
# Run 36i (session 29), nvidia-h100-x1, at 96ea034 (the float GEMVs' w_unpack and the fused MLPs' integer
# rounding moved to includes): the H100 tests of 36g, then the issue-7 stage (that its figures stay 36e's).
set -u
T0=$(date +%s)
bash docs/bench-data/run36/36g_h100_tests.sh 2>&1 | tail -5
export DOPPLER_HOME=$PWD
OUT=${OUT:-/tmp/out}
OUT=$OUT/36i_issue7 STAGES="issue7" timeout 330 bash scripts/device/h100-bench.sh 2>&1 | tail -3
echo "done $(( $(date +%s) - T0 )) s"
