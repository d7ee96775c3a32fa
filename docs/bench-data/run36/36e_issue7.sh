#!/usr/bin/env bash
# Run 36e (session 29), nvidia-h100-x1, at the session's last code commit: the issue-7 stage of
# scripts/device/h100-bench.sh only (the table in docs/BENCHMARKS.md).
set -u
T0=$(date +%s)
export DOPPLER_HOME=$PWD
OUT=${OUT:-/tmp/out}
OUT=$OUT/36e_issue7 STAGES="issue7" timeout 250 bash scripts/device/h100-bench.sh 2>&1 | tail -8
echo "done $(( $(date +%s) - T0 )) s"
