#!/bin/bash
# Run 40a (session 33): the pool's growing first blocks (c15da24: 32, 64, 128, then 256 MiB) against the binary
# before it (8b9d601, built the same way and carried as .abN/doppler.gz), on the lent GPU machine, alternating A and
# B: decode.lua (32-token prompt, 128 tokens, 2 runs), `doppler run`'s report (8-token prompt, 128 tokens) and,
# for Gemma Q4_K_M, compile.lua (its prepare_alloc_s allocates the f16 copies in new blocks).
# On the lent GPU machine: bash docs/bench-data/run40/40a_pool_ab.sh
. scripts/device/env.sh
A=/tmp/doppler-A; [ -x $A ] || { gunzip -c .abN/doppler.gz > $A && chmod +x $A; }   # carried gzipped (the carry limit)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/40a_gpu.txt 2>&1
IDS=2,10,20,30,40,50,60,70
for m in gemma-q4_k_m llama-q4_k_m gemma; do
  path=$(model $m)
  $A run --model $path --ids $IDS --max-tokens 16 > /dev/null 2>&1   # the caches warm for both binaries
  for round in 1 2; do
    for ab in A B; do
      bin=$B; [ $ab = A ] && bin=$A
      $bin recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 2 --label "$m $ab $round" \
        >> $OUT/40a_decode.jsonl 2>> $OUT/40a_err.txt
      echo "== $m $ab round $round" >> $OUT/40a_run.txt
      $bin run --model $path --ids $IDS --max-tokens 128 > /dev/null 2>> $OUT/40a_run.txt
      [ $m = gemma-q4_k_m ] && $bin recipes/bench/compile.lua --model $path --runs 1 --label "$m $ab $round" \
        >> $OUT/40a_compile.jsonl 2>> $OUT/40a_err.txt
    done
  done
done
python3 - "$OUT" > $OUT/40a_summary.txt <<'PY'
import json, sys
out = sys.argv[1]
for l in open(out + "/40a_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    print("%-22s run %d decode %7.1f tok/s p50 %.4f ms peak %.0f MB held %.0f MB" % (d["label"], d["run"],
          d["decode_tok_s"] or 0, d["p50_ms"], d["peak_vram_bytes"] / 1e6, d["vram_held_bytes"] / 1e6))
try:
    for l in open(out + "/40a_compile.jsonl"):
        d = json.loads(l)
        print("%-22s %s" % (d.get("label"), " ".join("%s=%s" % (k, v) for k, v in sorted(d.items())
              if k.endswith("_s") or k.endswith("_ms"))))
except Exception as e:
    print("compile:", e)
PY
grep -E "^==|first token|compil" $OUT/40a_run.txt >> $OUT/40a_summary.txt
cat $OUT/40a_summary.txt
