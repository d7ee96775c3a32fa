#!/usr/bin/env bash
# Run 27g (session 20), nvidia-h100-x1, the warm machine of 27f: the issue-7 table at this session's code (defaults:
# side_prefetch=auto, so on for decode passes on the H100).
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; export OUT
STAGES=issue7 B=$PWD/build-h100/doppler bash scripts/device/h100-bench.sh 2>&1 | tail -20
