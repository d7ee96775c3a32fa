#!/bin/bash
# Run 42i (session 35): read_chain.lua --model, the floor of a model's decode token with the step sizes taken from
# doppler's own decode plan on this device (a read-only dispatch per kernel at the bytes it reads that nothing
# in the step writes), for the four models; for the Q4_K_M models also 42e's hand-derived sizes in the same call.
# On the lent GPU machine: bash docs/bench-data/run42/42i_model_floor.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/42i_gpu.txt 2>&1
for m in gemma-q4_k_m llama-q4_k_m gemma llama; do
  path=$(model $m)
  $B recipes/bench/read_chain.lua --model $path --groups auto --loads 4 --runs 9 --label "$m model" \
    >> $OUT/42i_floor.jsonl 2>> $OUT/42i_err.txt
done
for m in gemma llama; do
  read list n total < <(source <(sed -n "/^sizes() {/,/^}/p" docs/bench-data/run42/42e_token_floor.sh); sizes $m)
  $B recipes/bench/read_chain.lua --sizes $list --regions $n --steps $((4 * n)) --groups auto --loads 4 --runs 9 \
    --label "$m-q4_k_m sizes" >> $OUT/42i_floor.jsonl 2>> $OUT/42i_err.txt
done
python3 - "$OUT" > $OUT/42i_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1] + "/42i_floor.jsonl"):
    d = json.loads(l)
    ms = d.get("floor_ms_per_token") or d["wall_us_per_run"] / 4e3
    kb = d.get("kernel_bytes_per_token")
    print("%-22s kernels %4s bytes/token %12d floor %.4f ms (%.1f tok/s)%s" % (d["label"],
          d.get("kernels_per_token", d["regions"]), d.get("bytes_per_token", d["bytes_per_run"] // 4), ms, 1e3 / ms,
          (" | " + " ".join("%s %d" % kv for kv in sorted(kb.items()))) if kb else ""))
PY
cat $OUT/42i_summary.txt
