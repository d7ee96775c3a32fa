#!/bin/bash
# Run 52a (session 45): the issue-7 stage at a32c0ad (the wide method removed; the code as at 0b82780) on the lent
# GPU, so that every target's figure is from the current code and one call: Gemma 3 1B Q4_K_M and F16, Llama 3.2
# 1B Q4_K_M and F16 decode (128 tokens after 32, three fresh processes each), prefill of 512 and TTFT of 32 tokens
# (Gemma Q4_K_M and F16), submits and bytes read back per token. Then, while LIMIT (seconds, default 540) allows,
# test_gpu_loop and test_fuse_attn on that GPU.
# On the lent GPU machine: LIMIT=540 bash docs/bench-data/run52/52a_issue7_head.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
T0=$(date +%s)
LIMIT=${LIMIT:-540}
left() { [ $(( $(date +%s) - T0 )) -lt $(( LIMIT - $1 )) ]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/52a_gpu.txt 2>&1
OUT=$OUT/issue7 STAGES=issue7 bash scripts/device/h100-bench.sh > $OUT/52a_issue7_run.txt 2>&1
cp $OUT/issue7/issue7.jsonl $OUT/52a_issue7.jsonl; cat $OUT/issue7/err.txt $OUT/issue7/convert.txt > $OUT/52a_err.txt 2>/dev/null
rm -rf $OUT/issue7
echo "issue7 stage done $(( $(date +%s) - T0 )) s" >> $OUT/52a_tests.txt
for t in gpu_loop fuse_attn; do
  left 120 || break
  timeout $(( LIMIT - 20 - $(date +%s) + T0 )) $B tests/lua/test_$t.lua > /tmp/t_$t.txt 2>&1
  echo "test_$t rc=$? $(tail -1 /tmp/t_$t.txt)" >> $OUT/52a_tests.txt
done
python3 - "$OUT/52a_issue7.jsonl" > $OUT/52a_summary.txt <<'PY'
import json, sys, collections, statistics
g = collections.defaultdict(list)
for l in open(sys.argv[1]):
    try: d = json.loads(l)
    except Exception: continue
    g[(d["label"], d["model"].split("/")[-1], d["mode"])].append(d)
for (lab, m, mode), ds in sorted(g.items()):
    key = {"decode": "decode_tok_s", "prefill": "prefill_tok_s", "ttft": "ttft_ms"}[mode]
    v = [d[key] for d in ds]
    print("%-12s %-16s %-7s %-13s median %.2f  all %s  submits %.3f  readback %.2f" % (lab, m, mode, key,
          statistics.median(v), " ".join("%.2f" % x for x in v), ds[0]["submits_per_token"], ds[0]["readback_bytes_per_token"]))
PY
echo "total $(( $(date +%s) - T0 )) s" >> $OUT/52a_tests.txt
cat $OUT/52a_gpu.txt $OUT/52a_summary.txt $OUT/52a_tests.txt
