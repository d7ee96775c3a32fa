#!/bin/bash
# Run 56a (session 49): attention_prefill_cm with several row tiles per workgroup (hint
# attention_prefill_cm_rows). 55a found a 16000-token Llama 3.2 1B prefill spending 1.95 of its 2.33 s in this
# kernel (~8 TFLOPS). And attention_decode with more than 64 chunks (its merge's MAX_CHUNKS now follows the
# plan's): 55a's Llama decode after 16000 tokens was 1.32x faster with 64 chunks than with 32.
# First test_attention_cm.lua (every split / keys / rows variant against the double-precision reference) and
# test_attention_long.lua (up to 256 chunks); then prefill of synthetic Llama 3.2 1B and Gemma 3 1B F16 (the
# kernel reads f16 q, k, v whatever the weights) at several prompt lengths, one fresh process per (prompt,
# configuration), the profiled pass giving the attention kernel's GPU ms; Llama's decode after 16000 tokens
# with 64, 128 and 256 chunks; then the fixture-model tests whose prefill runs this kernel, under the new auto.
# The kernel change is not on main (it was never run on a GPU): apply docs/bench-data/run56/prefill_rows.patch
# here first (`git apply docs/bench-data/run56/prefill_rows.patch`, or check out branch wip/prefill-rows), then
# on the lent GPU machine: LIMIT=570 bash docs/bench-data/run56/56a_prefill_rows.sh
grep -q attention_prefill_cm_rows lua/lib/doppler/hints.lua ||
  { echo "56a: apply docs/bench-data/run56/prefill_rows.patch first (hint attention_prefill_cm_rows is missing)" >&2; exit 1; }
. scripts/device/env.sh
RUN=56a; . docs/bench-data/run56/prefill_lib.sh   # run, cfg, prefill_summary
export DOPPLER_GPU_TIMEOUT_MS=30000
T0=$(date +%s)
LIMIT=${LIMIT:-570}
left() { [ $(( $(date +%s) - T0 )) -lt $(( LIMIT - $1 )) ]; }
log() { echo "$* $(( $(date +%s) - T0 )) s" >> $OUT/56a_log.txt; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/56a_gpu.txt 2>&1
timeout 150 $B tests/lua/test_attention_cm.lua > $OUT/56a_test_attention_cm.txt 2>&1
log "test_attention_cm rc=$? ($(tail -1 $OUT/56a_test_attention_cm.txt))"
timeout 60 $B tests/lua/test_attention_long.lua > $OUT/56a_test_attention_long.txt 2>&1
log "test_attention_long rc=$? ($(tail -1 $OUT/56a_test_attention_long.txt))"
# Llama 3.2 1B: head_dim 64, 8 kv heads, every layer global
path=$(model llama); log "llama made"
for pt in 1024 3900; do
  for c in s4r1k16 auto s1r4k32 s1r2k64 s1r8k16 s2r2k32 s4r1k64 s1r1k64; do
    left 200 && run "llama/p$pt/$c" $path $pt $(cfg $c)
  done
done
for c in s4r1k16 auto s1r4k32; do left 170 && run "llama/p16000/$c" $path 16000 $(cfg $c); done
# decode after 16000 tokens (context 16384): the auto (64 chunks) against 128 and 256, alternating, unprofiled
for r in 1 2; do
  for s in 64 128 256; do
    left 130 || continue
    timeout 40 $B recipes/bench/decode.lua --model $path --prompt-tokens 16000 --tokens 128 --runs 2 --no-profile \
      --hint context=16384 --hint attention_splits=$s --label "llama/d16000/splits=$s/r$r" >> $OUT/56a_decode.jsonl 2>>$OUT/56a_err.txt
    log "llama/d16000/splits=$s/r$r rc=$?"
  done
done
# the fixture models' tests whose prefills run attention_prefill_cm (under the auto)
mkdir -p $OUT/56a_tests
for t in gemma3_fixtures families_fixtures attention_long gguf_fixtures; do
  left 100 || { log "test_$t not run (time)"; continue; }
  timeout 90 $B tests/lua/test_$t.lua > $OUT/56a_tests/test_$t.txt 2>&1
  log "test_$t rc=$? ($(tail -1 $OUT/56a_tests/test_$t.txt))"
done
# Gemma 3 1B: head_dim 256, one kv head, 5 of 6 layers a 512-key window
left 90 && { path=$(model gemma); log "gemma made"; }
for pt in 512 3900; do
  for c in s4r1k16 s4r1k32 s2r1k16 s2r2k16 s4r2k16 s2r2k32 s8r1k16; do
    left 25 && run "gemma/p$pt/$c" $path $pt $(cfg $c)
  done
done
for c in s4r1k16 s2r2k16; do left 20 && run "gemma/p16000/$c" $path 16000 $(cfg $c); done
prefill_summary
python3 -c '
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l); print("%-32s decode %.1f tok/s p50 %.4f ms" % (d["label"], d["decode_tok_s"], d["p50_ms"]))
' $OUT/56a_decode.jsonl >> $OUT/56a_summary.txt
log total
cat $OUT/56a_gpu.txt $OUT/56a_summary.txt $OUT/56a_log.txt; tail -5 $OUT/56a_err.txt
