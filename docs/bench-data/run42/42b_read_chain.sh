#!/usr/bin/env bash
# 42b: 42a again with the GPU's clock raised first (200 ms of untimed replays per setting) and no timestamp
# queries in the wall-clock recording; plus the same steps reading one region (from the L2). nvidia-h100-x1.
set -u
. scripts/device/env.sh
R="$B recipes/bench/read_chain.lua"
{
  $R --bytes 16 --steps 26 --groups 1,132,528,2112 --loads 1 --label empty
  for sz in 2097152 10948608; do
    $R --bytes $sz --steps 26 --groups 132,216,264,528,1056 --loads 1,2,4,8 --label wg256
    $R --bytes $sz --steps 26 --wg 1024 --groups 132 --loads 2,4,8,16 --label wg1024
    $R --bytes $sz --steps 26 --regions 1 --groups 264,528,1056 --loads 1,4 --label l2
  done
  $R --bytes 10948608 --steps 1 --groups 264,528,1056 --loads 1,4 --label single
  $R --bytes 18874368 --steps 16 --groups 264,528,1056,2112 --loads 1,2,4,8 --label wg256
  $R --bytes 18874368 --steps 16 --wg 1024 --groups 132 --loads 2,4,8,16 --label wg1024
  $R --bytes 18874368 --steps 16 --regions 1 --groups 528,1056 --loads 1,4 --label l2
  $R --bytes 134217728 --steps 4 --groups 1056,2112,4224 --loads 1,4 --label big
} > $OUT/42b_read_chain.jsonl 2> $OUT/42b_err.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm --format=csv > $OUT/42b_gpu.txt 2>&1
python3 - "$OUT/42b_read_chain.jsonl" > $OUT/42b_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    print(f"{d['label']:7s} {d['bytes']:>9d} s{d['steps']:<3d}r{d['regions']:<3d} {d['groups']:>5d}x{d['wg']:<5d} L{d['loads']:<3d} wall {d['wall_us_per_step']:7.2f} us {d['wall_gb_s']:7.1f} GB/s  gpu {d.get('gpu_us_per_step',0):7.2f} us {d.get('gpu_gb_s',0):7.1f} GB/s")
PY
cat $OUT/42b_summary.txt
