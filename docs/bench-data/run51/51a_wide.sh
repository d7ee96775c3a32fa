#!/bin/bash
# Run 51a (session 44): attention_decode's DP_WIDE method (hint attention_decode=wide; blocks of keys loaded at
# once, chunks of two blocks: short contexts in one chunk, no merge) on the lent GPU. In order of need, each
# step only while time is left (LIMIT seconds, default 540):
#   1. the synthetic Gemma 3 1B Q4_K_M model (~100 s on a fresh machine); decode.lua (32-token prompt, 128
#      tokens) in fresh processes, one profiled per variant, then rounds that alternate: flash (the defaults),
#      wide (auto: 1024 invocations, 128-key blocks, chunks of 256), wide with chunks of one block
#      (attention_min_chunk=128), wide on 256 invocations; greedy ids of `doppler run` with flash and wide;
#   2. the same for Llama 3.2 1B Q4_K_M (its model another ~100 s), two rounds;
#   3. Gemma 3 1B Q4_K_M after a 1024-token prompt: flash, wide, wide with chunks of 128 keys;
#   4. test_fuse_attn.lua (its wide case: every family's logits as flash, in f32).
# On the lent GPU machine: bash docs/bench-data/run51/51a_wide.sh
. scripts/device/env.sh
export DOPPLER_GPU_TIMEOUT_MS=20000
T0=$(date +%s)
LIMIT=${LIMIT:-540}
left() { [ $(( $(date +%s) - T0 )) -lt $(( LIMIT - $1 )) ]; }   # left N: N seconds are still left
S=$OUT/51a_summary.txt
hint() {
  case $1 in
    flash) ;;
    wide) echo "--hint attention_decode=wide" ;;
    wmc128) echo "--hint attention_decode=wide --hint attention_min_chunk=128" ;;
    w256) echo "--hint attention_decode=wide --hint attention_wg=256" ;;
  esac
}
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2"
run() {  # pass variant model
  local extra=--no-profile
  [ $1 = p ] && extra=
  timeout 60 $B $D $extra $(hint $2) --model $3 --label "$(basename $3) $2 $1" >> $OUT/51a_decode.jsonl 2>> $OUT/51a_err.txt
}
ids() {  # model: greedy ids with flash and with wide
  local m=$1
  for v in flash wide; do
    timeout 30 $B run --model $m --ids 2,10,300,4000,17,99,1234,5678,42,7,777,31337,5,6,8,9 --max-tokens 64 \
      --print-ids $(hint $v) 2>/dev/null | head -1 > $OUT/51a_ids_$(basename $m)_$v.txt
  done
  python3 - $OUT/51a_ids_$(basename $m)_flash.txt $OUT/51a_ids_$(basename $m)_wide.txt >> $S <<'PY'
import json, sys
a, b = (json.loads(open(f).read() or "[]") for f in sys.argv[1:3])
same = 0
for x, y in zip(a, b):
    if x != y: break
    same += 1
print("ids %s: flash %d, wide %d, first %d the same%s" % (sys.argv[1].split("_ids_")[1][:-10], len(a), len(b), same,
      " (all)" if a == b and a else ""))
PY
}
# Gemma 3 1B Q4_K_M first (the issue's model), then Llama 3.2 1B Q4_K_M while time is left
G4=$(model gemma-q4_k_m)
echo "gemma model $(( $(date +%s) - T0 )) s" >> $S
VS="flash wide wmc128 w256"
for v in $VS; do left 60 && run p $v $G4; done
for i in 1 2 3; do for v in $VS; do left 60 && run $i $v $G4; done; done
ids $G4
echo "gemma done $(( $(date +%s) - T0 )) s" >> $S
L4=
if left 200; then
  L4=$(model llama-q4_k_m)
  echo "llama model $(( $(date +%s) - T0 )) s" >> $S
  for v in $VS; do left 40 && run p $v $L4; done
  for i in 1 2; do for v in $VS; do left 40 && run $i $v $L4; done; done
  left 30 && ids $L4
fi
DL="recipes/bench/decode.lua --prompt-tokens 1024 --tokens 128 --runs 1 --no-profile"
for i in 1 2; do for v in flash wide wmc128; do
  left 70 && timeout 40 $B $DL $(hint $v) --model $G4 --label "$(basename $G4)-ctx1k $v $i" >> $OUT/51a_decode.jsonl 2>> $OUT/51a_err.txt
done; done
left 40 && { timeout $(( LIMIT - 25 - $(date +%s) + T0 )) $B tests/lua/test_fuse_attn.lua > $OUT/51a_test_fuse_attn.txt 2>&1
  echo "test_fuse_attn rc $?: $(tail -1 $OUT/51a_test_fuse_attn.txt)" >> $S; }
python3 - "$OUT" >> $S <<'PY'
import json, sys, collections, statistics
tok = collections.defaultdict(list); prof = {}
for l in open(sys.argv[1] + "/51a_decode.jsonl"):
    try: d = json.loads(l)
    except Exception: continue
    m, v, p = d["label"].split()
    if p == "p": prof[(m, v)] = (d["decode_tok_s"], d.get("gpu_ms_per_kernel") or {})
    else: tok[(m, v)].append(d["decode_tok_s"])
for k in sorted(tok):
    v = tok[k]
    print("%-22s %-6s median %.1f  min %.1f  max %.1f  n %d" % (k[0], k[1], statistics.median(v), min(v), max(v), len(v)))
for k in sorted(prof):
    t, a = prof[k]
    print("profile %-16s %-6s %.1f | %s" % (k[0], k[1], t, " ".join("%s %.4f" % (n, x) for n, x in sorted(a.items()))))
PY
echo "total $(( $(date +%s) - T0 )) s" >> $S
cat $S
