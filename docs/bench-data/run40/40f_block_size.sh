#!/bin/bash
# Run 40f (session 33): does the device-local block size move decode? An experimental binary (the tree at
# c15570f plus a DP_TMP_BLOCK_MB override of the pool's default block size, not committed; carried as
# .abN/doppler-x.gz) decoding with 64, 256 (the default) and 1024 MiB blocks, alternating, two rounds.
# On the lent GPU machine: bash docs/bench-data/run40/40f_block_size.sh
. scripts/device/env.sh
X=/tmp/doppler-x; [ -x $X ] || { gunzip -c .abN/doppler-x.gz > $X && chmod +x $X; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/40f_gpu.txt 2>&1
for m in gemma-q4_k_m llama-q4_k_m gemma; do
  path=$(model $m)
  $X run --model $path --ids 2,10,20 --max-tokens 16 > /dev/null 2>&1
  for round in 1 2; do
    for mb in 256 1024 64; do
      DP_TMP_BLOCK_MB=$mb $X recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 2 \
        --no-profile --label "$m $mb $round" >> $OUT/40f_decode.jsonl 2>> $OUT/40f_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/40f_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1] + "/40f_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    print("%-22s run %d decode %7.1f tok/s p50 %.4f ms held %.0f MB" % (d["label"], d["run"],
          d["decode_tok_s"] or 0, d["p50_ms"], d["vram_held_bytes"] / 1e6))
PY
cat $OUT/40f_summary.txt
