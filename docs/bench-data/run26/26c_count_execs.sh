#!/bin/bash
# Run by hand: DOPPLER_BIN=this script for each tests/lua/test_*.lua (xargs -P2), DOPPLER_VALIDATION=0.
echo "$PPID $(basename "$DP_TEST_NAME") $1 $2 $3" >> /tmp/inproc/execs.log
exec /work/main/build/doppler "$@"
