#!/bin/bash
# Run 56c (session 49): 56a cut to what a short call holds, for when little device time is left: the tests of
# the patch's kernel (test_attention_cm.lua, test_attention_long.lua), then Llama 3.2 1B F16 prefill at 3900 and
# 16000 tokens with today's plan (s4r1k16) against the patch's auto and s1r4k32. Needs the patch, as 56a.
# On the lent GPU machine: LIMIT=300 bash docs/bench-data/run56/56c_prefill_rows_short.sh
grep -q attention_prefill_cm_rows lua/lib/doppler/hints.lua ||
  { echo "56c: apply docs/bench-data/run56/prefill_rows.patch first" >&2; exit 1; }
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=30000
T0=$(date +%s); LIMIT=${LIMIT:-300}
left() { [ $(( $(date +%s) - T0 )) -lt $(( LIMIT - $1 )) ]; }
log() { echo "$* $(( $(date +%s) - T0 )) s" >> $OUT/56c_log.txt; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/56c_gpu.txt 2>&1
( path=$(model llama); log "llama made" ) &   # the model is made while the tests run
timeout 120 $B tests/lua/test_attention_cm.lua > $OUT/56c_test_attention_cm.txt 2>&1
log "test_attention_cm rc=$? ($(tail -1 $OUT/56c_test_attention_cm.txt))"
timeout 40 $B tests/lua/test_attention_long.lua > $OUT/56c_test_attention_long.txt 2>&1
log "test_attention_long rc=$? ($(tail -1 $OUT/56c_test_attention_long.txt))"
wait
for pt in 3900 16000; do
  for c in s4r1k16 auto s1r4k32; do
    left 25 || continue
    h=(); [ $c = s4r1k16 ] && h=(--hint attention_prefill_cm_split=4 --hint attention_prefill_cm_rows=1 --hint attention_prefill_cm_keys=16)
    [ $c = s1r4k32 ] && h=(--hint attention_prefill_cm_split=1 --hint attention_prefill_cm_rows=4 --hint attention_prefill_cm_keys=32)
    [ $pt -gt 4000 ] && h+=(--hint context=16384)
    timeout 40 $B recipes/bench/prefill.lua --model $L --prompt-tokens $pt --tokens 4 --profile-tokens 4 --runs 2 \
      --warmup 0 --warmup-ms 0 "${h[@]}" --label "llama/p$pt/$c" >> $OUT/56c_prefill.jsonl 2>>$OUT/56c_err.txt
    log "llama/p$pt/$c rc=$?"
  done
done
python3 - $OUT/56c_prefill.jsonl > $OUT/56c_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    k = d.get("prefill_gpu_ms_per_kernel") or {}
    a = sum(v for n, v in k.items() if n.startswith("attention"))
    print("%-24s prefill %8.0f tok/s  ttft %8.1f ms  attention %8.2f ms of %8.2f GPU ms" % (
        d["label"], d["prefill_tok_s"], d["ttft_ms"], a, d.get("prefill_gpu_ms") or 0))
PY
log total
cat $OUT/56c_gpu.txt $OUT/56c_summary.txt $OUT/56c_log.txt; tail -5 $OUT/56c_err.txt
