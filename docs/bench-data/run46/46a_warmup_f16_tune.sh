#!/bin/bash
# Run 46a (session 39): the issue-7 stage again, now that the bench scripts warm up for --warmup-ms (300 ms on a
# GPU, 83f1150) before the profiled pass and the timed runs: do the cold profiled passes 45a saw go, and do the
# figures move? Then `doppler tune` over every knob on Gemma 3 1B F16, never tuned on the H200, and its picks
# against the defaults over 3 alternating fresh processes.
# On the lent GPU machine: bash docs/bench-data/run46/46a_warmup_f16_tune.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
t0=$(date +%s)
OUT=$OUT/issue7 STAGES=issue7 bash scripts/device/h100-bench.sh > $OUT/46a_issue7_run.txt 2>&1
cp $OUT/issue7/issue7.jsonl $OUT/46a_issue7.jsonl; cat $OUT/issue7/err.txt $OUT/issue7/convert.txt > $OUT/46a_err.txt 2>/dev/null
rm -rf $OUT/issue7
echo "issue7 stage $(( $(date +%s) - t0 )) s" | tee $OUT/46a_summary.txt
python3 - "$OUT/46a_issue7.jsonl" >> $OUT/46a_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d = json.loads(l)
    k = d.get("gpu_ms_per_kernel") or {}
    print(d["label"], d["model"].split("/")[-1], d["mode"], "decode %.1f prefill %.0f ttft %.2f p50 %.4f gpu %.4f warm %s/%s/%s" % (
        d["decode_tok_s"] or 0, d["prefill_tok_s"] or 0, d["ttft_ms"] or 0, d.get("p50_ms") or 0, sum(k.values()),
        d.get("warmup_ms"), d.get("warmup_runs"), d.get("profile_warmup_runs")))
PY
M=$(model gemma); t1=$(date +%s)
timeout 200 $B tune --model $M --dry-run --json > $OUT/46a_tune_gemma.json 2> $OUT/46a_tune_gemma.txt
echo "tune gemma rc=$? $(( $(date +%s) - t1 )) s" | tee -a $OUT/46a_summary.txt
H=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' '.join('--hint %s=%s' % kv for kv in d['hints'].items()))" $OUT/46a_tune_gemma.json)
echo "gemma tuned: $H" | tee -a $OUT/46a_summary.txt
if [ -n "$H" ]; then
  for i in 1 2 3; do
    timeout 60 $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --no-profile $H --label "gemma tuned" >> $OUT/46a_ab.jsonl 2>> $OUT/46a_err.txt
    timeout 60 $B recipes/bench/decode.lua --model $M --prompt-tokens 32 --tokens 128 --runs 1 --no-profile --label "gemma default" >> $OUT/46a_ab.jsonl 2>> $OUT/46a_err.txt
  done
  python3 - "$OUT/46a_ab.jsonl" >> $OUT/46a_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    g[d["label"]].append(d["decode_tok_s"])
for k, v in g.items():
    print("%-16s n=%d median %.1f | %s" % (k, len(v), statistics.median(v), " ".join("%.1f" % x for x in v)))
PY
fi
echo "total $(( $(date +%s) - t0 )) s" >> $OUT/46a_summary.txt
cat $OUT/46a_summary.txt; tail -3 $OUT/46a_err.txt
