. scripts/device/env.sh
RUN=57b; . docs/bench-data/run56/prefill_lib.sh
T0=$(date +%s); log() { echo "$* $(( $(date +%s) - T0 )) s" >> $OUT/57b_log.txt; }
timeout 100 $B tests/lua/test_tune.lua > $OUT/57b_test_tune.txt 2>&1; log "test_tune rc=$?"
for pt in 1024 3900; do for c in auto s4r1k16 s1r2k32 s2r2k16; do run "qwen/p$pt/$c" $Q $pt $(cfg $c); done; done
for r in 1 2; do for c in auto s4r2k16; do run "gemma/p3900/$c/r$r" $G 3900 $(cfg $c); done; done
prefill_summary; cat $OUT/57b_summary.txt $OUT/57b_log.txt; grep -v '^ok' $OUT/57b_test_tune.txt | head
