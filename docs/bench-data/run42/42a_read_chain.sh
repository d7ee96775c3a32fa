#!/usr/bin/env bash
# 42a: the floor of a decode GEMV step — dependent dispatches that only read their bytes (recipes/bench/read_chain.lua),
# at the sizes of doppler's decode steps: empty (ordering alone), 2 MiB (q/k/v, o), 10.9 MB (Gemma 3 1B's Q5_0
# gate+up), 19 MB (Llama 3.2 1B's Q4_K gate+up); one call on the nvidia-h100-x1.
set -u
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/42a_gpu.txt 2>&1
R="$B recipes/bench/read_chain.lua"
{
  $R --bytes 16 --steps 26 --groups 1,132,528,2112 --loads 1 --label empty
  for sz in 2097152 10948608; do
    $R --bytes $sz --steps 26 --groups 132,216,264,396,528,1056,2112 --loads 1,2,4,8 --label wg256
    $R --bytes $sz --steps 26 --wg 1024 --groups 132,264 --loads 1,2,4,8,16 --label wg1024
    $R --bytes $sz --steps 26 --wg 128 --groups 1056,2112,4224 --loads 1,2,4,8 --label wg128
  done
  $R --bytes 18874368 --steps 16 --groups 132,264,528,1056,2112 --loads 1,2,4,8 --label wg256
  $R --bytes 18874368 --steps 16 --wg 1024 --groups 132,264 --loads 2,4,8,16 --label wg1024
} > $OUT/42a_read_chain.jsonl 2> $OUT/42a_err.txt
python3 - "$OUT/42a_read_chain.jsonl" > $OUT/42a_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    print(f"{d['label']:8s} {d['bytes']:>9d} {d['groups']:>5d}x{d['wg']:<5d} L{d['loads']:<3d} wall {d['wall_us_per_step']:7.2f} us {d['wall_gb_s']:7.1f} GB/s  gpu {d.get('gpu_us_per_step',0):7.2f} us")
PY
cat $OUT/42a_summary.txt
