#!/usr/bin/env bash
# Run 38j (session 31), nvidia-h100-x1, at 9bfe545: the pipeline cache file's committed format on the H100
# (38j_pipeline_file.lua twice), then `doppler run` on the tiny Gemma 3 fixture three times in a fresh cache
# directory (the file written by the first, read by the others: its report's compile times).
set -u
. scripts/device/env.sh
export DOPPLER_CACHE_DIR=/tmp/pc38j
for i in 1 2; do $B docs/bench-data/run38/38j_pipeline_file.lua; done
ls -la $DOPPLER_CACHE_DIR/pipelines-*
for i in 1 2 3; do $B run --model tests/fixtures/models/gemma3-tiny --ids 2,5,7 --max-tokens 40 2>&1 >/dev/null | tail -1; done
ls -la $DOPPLER_CACHE_DIR/pipelines-*
