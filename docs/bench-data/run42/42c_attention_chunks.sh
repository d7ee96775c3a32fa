#!/bin/bash
# Run 42c (session 35): attention_decode's chunks. 42b put a dependent step that reads almost nothing at ~3.3 us
# (GPU) / 3.8 us (wall); attention_decode takes ~10 us per Gemma layer. With the defaults a chunk is one round
# of the workgroup's clusters (8 keys for Gemma), so every step past 8 keys splits and its last workgroup merges
# (an atomic and a load of the partials, two memory round trips more). Here: fewer, longer chunks (more keys per
# round with attention_unroll, more clusters with attention_wg, attention_min_chunk up to the bench's 160 keys:
# no merge at all). Per-kernel GPU time from one profiled process per setting, decode tok/s from 2 more
# processes, alternating. On the lent GPU machine: bash docs/bench-data/run42/42c_attention_chunks.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/42c_gpu.txt 2>&1
run() {   # model, label, extra option ("" or --no-profile), hints...
  local path=$1 label=$2 extra=$3; shift 3
  local hs=(); for h in "$@"; do hs+=(--hint $h); done
  $B recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 1 $extra "${hs[@]}" --label "$label" \
    >> $OUT/42c_decode.jsonl 2>> $OUT/42c_err.txt
}
G_SETS=(
  "default"
  "attention_min_chunk=16"
  "attention_unroll=4,attention_min_chunk=32"
  "attention_unroll=4,attention_min_chunk=64"
  "attention_unroll=4,attention_min_chunk=160"
  "attention_wg=512,attention_unroll=2,attention_min_chunk=32"
  "attention_wg=512,attention_unroll=4,attention_min_chunk=64"
  "attention_wg=512,attention_unroll=4,attention_min_chunk=128"
  "attention_wg=512,attention_unroll=2,attention_min_chunk=160"
  "attention_wg=1024,attention_unroll=2,attention_min_chunk=64"
  "attention_wg=1024,attention_unroll=2,attention_min_chunk=160"
)
L_SETS=(
  "default"
  "attention_min_chunk=16"
  "attention_unroll=4,attention_min_chunk=32"
  "attention_wg=256,attention_unroll=2,attention_min_chunk=64"
  "attention_wg=256,attention_unroll=4,attention_min_chunk=160"
  "attention_wg=512,attention_unroll=2,attention_min_chunk=128"
)
for m in gemma-q4_k_m llama-q4_k_m; do
  path=$(model $m)
  if [ $m = gemma-q4_k_m ]; then sets=("${G_SETS[@]}"); else sets=("${L_SETS[@]}"); fi
  for pass in p 1 2; do
    for s in "${sets[@]}"; do
      hs=(); [ "$s" != default ] && hs=(${s//,/ })
      if [ $pass = p ]; then run $path "$m $s p" "" "${hs[@]}"
      else run $path "$m $s $pass" --no-profile "${hs[@]}"; fi
    done
  done
done
python3 - "$OUT" > $OUT/42c_summary.txt <<'PY'
import json, sys, collections, statistics
tok = collections.defaultdict(list); prof = {}
for l in open(sys.argv[1] + "/42c_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, s, p = d["label"].split()
    tok[(m, s)].append(d["decode_tok_s"])
    if p == "p": prof[(m, s)] = d.get("gpu_ms_per_kernel", {})
for k, v in tok.items():
    a = prof.get(k, {})
    print("%-13s %-58s tok/s %s | attention %.4f gpu_q %.4f" % (k[0], k[1], " ".join("%.1f" % x for x in v),
          a.get("attention_decode", 0), a.get("gemv_q", 0)))
PY
cat $OUT/42c_summary.txt
