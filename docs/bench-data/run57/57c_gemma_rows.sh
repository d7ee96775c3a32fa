#!/bin/bash
# Run 57c (session 51, on 57b's warm machine): Gemma 3 1B F16 prefill, its auto (s4r1k16) against s4r2k16 at 512
# and 16000 tokens, two rounds alternating, one fresh process each.
. scripts/device/env.sh
RUN=57c; . docs/bench-data/run56/prefill_lib.sh
T0=$(date +%s); log() { echo "$* $(( $(date +%s) - T0 )) s" >> $OUT/57c_log.txt; }
G=$(model gemma)
for r in 1 2; do for pt in 512 16000; do for c in auto s4r2k16; do run "gemma/p$pt/$c/r$r" $G $pt $(cfg $c); done; done; done
prefill_summary; cat $OUT/57c_summary.txt $OUT/57c_log.txt; tail -3 $OUT/57c_err.txt
