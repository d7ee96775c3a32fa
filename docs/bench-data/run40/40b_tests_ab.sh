#!/bin/bash
# Run 40b (session 33): the pool's blocks grow only for host-visible memory (40a: growing device-local blocks cost
# Gemma 3 1B Q4_K_M's decode 1.4 %): A (8b9d601, .abN/doppler.gz) against B (the tree) again, decode only, then
# the tests the pool touches with B. On the lent GPU machine: bash docs/bench-data/run40/40b_tests_ab.sh
. scripts/device/env.sh
A=/tmp/doppler-A; [ -x $A ] || { gunzip -c .abN/doppler.gz > $A && chmod +x $A; }   # carried gzipped (the carry limit)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/40b_gpu.txt 2>&1
for m in gemma-q4_k_m llama-q4_k_m; do
  path=$(model $m)
  $A run --model $path --ids 2,10,20 --max-tokens 16 > /dev/null 2>&1
  for round in 1 2; do
    for ab in A B; do
      bin=$B; [ $ab = A ] && bin=$A
      $bin recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 2 --no-profile \
        --label "$m $ab $round" >> $OUT/40b_decode.jsonl 2>> $OUT/40b_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/40b_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1] + "/40b_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    print("%-22s run %d decode %7.1f tok/s p50 %.4f ms peak %.0f MB held %.0f MB" % (d["label"], d["run"],
          d["decode_tok_s"] or 0, d["p50_ms"], d["peak_vram_bytes"] / 1e6, d["vram_held_bytes"] / 1e6))
PY
cat $OUT/40b_summary.txt
for t in gguf_fixtures gpu_loop side_prefetch warmup bench; do
  echo "== test_$t" >> $OUT/40b_tests.txt
  timeout 200 $B tests/lua/test_$t.lua >> $OUT/40b_tests.txt 2>&1; echo "test_$t: $(tail -1 $OUT/40b_tests.txt)"
done
