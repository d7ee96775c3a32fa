#!/bin/bash
# Run 43a (session 36): the side prefetcher's reads started at the last light stage (hint prefetch_lead: a stage's
# weights read from the start of the last stage before it that has none, such as attention, up to N stages back)
# and a uniform depth (prefetch_depth), against the defaults; alternating fresh processes, decode tok/s; one
# profiled process each for default and prefetch_lead=2; then test_side_prefetch with a lead on this GPU.
# On the lent GPU machine: bash docs/bench-data/run43/43a_light_lead.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/43a_gpu.txt 2>&1
dec() {  # model label hints...
  local m=$1 lab=$2; shift 2
  local hs=(); for h in "$@"; do hs+=(--hint "$h"); done
  $B recipes/bench/decode.lua --model $(model $m) --prompt-tokens 32 --tokens 128 --runs 1 --no-profile "${hs[@]}" \
    --label "$m $lab" >> $OUT/43a_decode.jsonl 2>> $OUT/43a_err.txt
}
for i in 1 2 3; do
  dec gemma-q4_k_m default
  dec gemma-q4_k_m lead2 prefetch_lead=2
  dec gemma-q4_k_m lead3 prefetch_lead=3
  dec gemma-q4_k_m depth2 prefetch_depth=2
  dec gemma-q4_k_m lead2_g64 prefetch_lead=2 prefetch_groups=64
done
for m in gemma-q4_k_m; do
  for h in prefetch_lead=0 prefetch_lead=2; do
    $B recipes/bench/decode.lua --model $(model $m) --prompt-tokens 32 --tokens 128 --runs 1 --profile-tokens 16 \
      --hint $h --label "$m prof_$h" >> $OUT/43a_profile.jsonl 2>> $OUT/43a_err.txt
  done
done
for i in 1 2 3; do
  for m in llama-q4_k_m gemma; do
    dec $m default
    dec $m lead2 prefetch_lead=2
    dec $m lead3 prefetch_lead=3
  done
done
python3 - "$OUT" > $OUT/43a_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/43a_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, lab = d["label"].split()
    g[(m, lab)].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-14s %-10s n=%d median %.1f min %.1f max %.1f | %s" % (k[0], k[1], len(v), statistics.median(v), min(v),
          max(v), " ".join("%.1f" % x for x in v)))
for l in open(sys.argv[1] + "/43a_profile.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    k = d.get("gpu_ms_per_kernel") or {}
    print(d["label"], "tok/s %.1f |" % d["decode_tok_s"], " ".join("%s %.4f" % (n, k[n]) for n in sorted(k)))
PY
cat $OUT/43a_summary.txt
$B tests/lua/tmp_test_sp.lua > $OUT/43a_h100_t_side_prefetch_lead.txt 2>&1; echo "lead test rc=$? $(tail -1 $OUT/43a_h100_t_side_prefetch_lead.txt)"
