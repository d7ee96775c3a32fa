#!/usr/bin/env bash
# Run 37g (session 30), nvidia-h100-x1: the issue-7 stage of scripts/device/h100-bench.sh at the session's last
# code (no kernel changed; doppler tune's loop and the device scripts' shared env.sh), the first run of h100-bench.sh
# through scripts/device/env.sh.
set -u
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
OUT=$OUT/37g_issue7 STAGES="issue7" timeout 500 bash scripts/device/h100-bench.sh 2>&1 | tail -16
echo "done $(( $(date +%s) - T0 )) s"
