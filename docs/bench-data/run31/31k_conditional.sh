#!/usr/bin/env bash
# Run 31k (session 24), nvidia-h100-x1: the GPU loop's steps skipped by conditional rendering (79c3146, the
# default where the device has VK_EXT_conditional_rendering) against the indirect dispatches (hint
# loop_skip=indirect) and the tree at the session's start (.abA = git archive 84bae02 lua recipes shaders
# models, run by this binary) on the four models, two rounds; the H100 tests the session touched; the
# issue-7 stage of scripts/device/h100-bench.sh.
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(date +%T)"
dec() {  # label home model args...
  local label=$1 home=$2 m=$3; shift 3
  DOPPLER_HOME=$home timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 "$@" >>"$OUT/31k_decode.jsonl" 2>>"$OUT/31k_err.txt"
}
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf $G $L; do
    dec start $PWD/.abA $m --runs 2 --no-profile
    dec conditional $PWD $m --runs 2 --no-profile
    dec indirect $PWD $m --runs 2 --no-profile --hint loop_skip=indirect
  done
  echo "round $round done $(date +%T)"
done
python3 - "$OUT/31k_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list); tok = collections.defaultdict(list); sub = {}
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        p50[key].append(d["p50_ms"]); tok[key].append(d["decode_tok_s"]); sub[key] = (d["submits_per_token"], d["readback_bytes_per_token"])
for key in p50:
    print("%-16s %-12s p50 %s  tok/s %s  submits %.4f readback %.2f" % (key[0], key[1], " ".join("%.4f" % x for x in p50[key]),
          " ".join("%.1f" % x for x in tok[key]), sub[key][0], sub[key][1]))
PY
for t in gpu_loop kernels side_prefetch gemma3_fixtures families_fixtures gguf_fixtures lm_head_fusion fuse_attn gemv_q8 tune bench; do
  timeout 200 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/31k_h100_tests.txt"
done
echo "tests done $(date +%T), $(( $(date +%s) - T0 )) s"
if [ $(( $(date +%s) - T0 )) -lt 450 ]; then
  OUT=$OUT STAGES=issue7 B=$B bash scripts/device/h100-bench.sh 2>&1 | grep -E '^issue7 [^ ]+ (decode|prefill|ttft) ' | awk '!seen[$2 $3]++'
fi
tail -3 "$OUT/31k_err.txt"
echo "done $(date +%T), $(( $(date +%s) - T0 )) s"
