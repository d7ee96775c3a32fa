#!/bin/bash
# Run 45c (session 38): on the nvidia-h200, what bounds decode in this design. (1) read_chain.lua --model: the
# floor of each model's token with the step sizes of doppler's own decode plan (a read-only dependent dispatch
# per kernel at the bytes it reads; 42i on the H100). (2) The persistent probe's Gemma- and Llama-shaped 4-bit
# chains at 132 x 1024, dispatch (barriers) against persistent (grid barriers) and chain (counters): what the
# unbuilt persistent decode would gain on this device (32a on the H100). (3) The tests of session 37's changes
# (test_fuse_attn: rope_kv on whole sliding caches; test_tune) on this GPU.
# On the lent GPU machine: bash docs/bench-data/run45/45c_h200_floor.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
for m in gemma-q4_k_m llama-q4_k_m gemma llama; do
  timeout 120 $B recipes/bench/read_chain.lua --model $(model $m) --groups auto --loads 4 --runs 9 --label "$m model" \
    >> $OUT/45c_floor.jsonl 2>> $OUT/45c_err.txt
done
for s in gemma llama; do
  timeout 120 $B recipes/bench/persistent.lua --shape $s --weights q4 --tokens 16 --runs 3 --groups 132 --wg 1024 \
    --modes dispatch,persistent,chain --label "$s q4 132 x 1024" >> $OUT/45c_probe.jsonl 2>> $OUT/45c_err.txt
  echo "probe $s rc=$?"
done
for t in fuse_attn tune; do
  timeout 200 $B tests/lua/test_$t.lua > /tmp/t_$t.txt 2>&1
  echo "test_$t rc=$? $(tail -1 /tmp/t_$t.txt)" >> $OUT/45c_tests.txt
done
python3 - "$OUT" > $OUT/45c_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1] + "/45c_floor.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    ms = d.get("floor_ms_per_token")
    print("%-22s kernels %4s bytes/token %12d floor %.4f ms (%.1f tok/s)" % (d["label"], d.get("kernels_per_token"),
          d.get("bytes_per_token", 0), ms, 1e3 / ms))
for l in open(sys.argv[1] + "/45c_probe.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    print("%-22s %-12s ms/token %.4f us/step %.2f same_bits %s" % (d["label"], d["mode"], d["ms_per_token"],
          d["us_per_step"], d.get("same_bits")))
PY
cat $OUT/45c_summary.txt $OUT/45c_tests.txt; tail -5 $OUT/45c_err.txt
