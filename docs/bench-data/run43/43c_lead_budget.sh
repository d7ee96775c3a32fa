#!/bin/bash
# Run 43c (session 36): prefetch_lead with its byte budget (a stage's reads start at the last light stage only
# where the bytes from there fit prefetch_max_mb, 24 MiB), alternating fresh processes against the defaults;
# profiles of Llama 3.2 1B Q4_K_M with and without the side prefetcher (its add_rmsnorm beside the side
# kernel's reads), and the GPU's SM clock sampled during a decode. On the lent GPU machine:
# bash docs/bench-data/run43/43c_lead_budget.sh
. scripts/device/env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.applications.graphics --format=csv,noheader > $OUT/43c_gpu.txt 2>&1
dec() {  # model label hints...
  local m=$1 lab=$2; shift 2
  local hs=(); for h in "$@"; do hs+=(--hint "$h"); done
  $B recipes/bench/decode.lua --model $(model $m) --prompt-tokens 32 --tokens 128 --runs 1 --no-profile "${hs[@]}" \
    --label "$m $lab" >> $OUT/43c_decode.jsonl 2>> $OUT/43c_err.txt
}
for i in 1 2 3; do
  for m in gemma-q4_k_m llama-q4_k_m gemma; do
    dec $m default
    dec $m lead2 prefetch_lead=2
    dec $m lead3 prefetch_lead=3
  done
done
prof() {  # model label hints...
  local m=$1 lab=$2; shift 2
  local hs=(); for h in "$@"; do hs+=(--hint "$h"); done
  $B recipes/bench/decode.lua --model $(model $m) --prompt-tokens 32 --tokens 128 --runs 1 --profile-tokens 16 \
    "${hs[@]}" --label "$m $lab" >> $OUT/43c_profile.jsonl 2>> $OUT/43c_err.txt
}
prof llama-q4_k_m prof_default
prof llama-q4_k_m prof_off side_prefetch=off
prof gemma-q4_k_m prof_lead2 prefetch_lead=2
prof gemma-q4_k_m prof_lead3 prefetch_lead=3
# the SM clock every 20 ms during three decodes of 512 tokens
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader -lms 20 > $OUT/43c_clock.csv 2>&1 &
SMI=$!
$B recipes/bench/decode.lua --model $(model gemma-q4_k_m) --prompt-tokens 32 --tokens 512 --runs 3 --no-profile \
  --label "gemma-q4_k_m clock" >> $OUT/43c_decode_clock.jsonl 2>> $OUT/43c_err.txt
kill $SMI
python3 - "$OUT" > $OUT/43c_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1] + "/43c_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, lab = d["label"].split()
    g[(m, lab)].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-14s %-10s n=%d median %.1f min %.1f max %.1f | %s" % (k[0], k[1], len(v), statistics.median(v), min(v),
          max(v), " ".join("%.1f" % x for x in v)))
for l in open(sys.argv[1] + "/43c_profile.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    k = d.get("gpu_ms_per_kernel") or {}
    print(d["label"], "tok/s %.1f |" % d["decode_tok_s"], " ".join("%s %.4f" % (n, k[n]) for n in sorted(k)))
for l in open(sys.argv[1] + "/43c_decode_clock.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    print(d["label"], "run", d.get("run"), "tok/s %.1f" % d["decode_tok_s"])
c = collections.Counter()
for l in open(sys.argv[1] + "/43c_clock.csv"):
    f = [x.strip() for x in l.split(",")]
    if len(f) >= 3: c[f[1]] += 1
print("SM clock samples:", dict(c.most_common(8)))
PY
cat $OUT/43c_summary.txt
