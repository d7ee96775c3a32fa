#!/usr/bin/env bash
# Run 31j (session 24), nvidia-h100-x1: 31i found the step-by-step path (decode_chunk=1, a submit per token)
# faster per token than the GPU loop's chunks (Gemma 3 1B Q4_K_M p50 1.319 against ~1.40 ms). The loop
# dispatches every kernel indirectly (so that an advance after a stop can zero the group counts). Bound:
# .abD1 = the loop with direct dispatches (work after a stop is then not skipped: timing only), against HEAD
# and HEAD with decode_chunk=1, on the four models, two rounds.
set -u
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
    --tokens 128 "$@" >>"$OUT/31j_decode.jsonl" 2>>"$OUT/31j_err.txt"
}
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf $G $L; do
    dec loop $PWD $m --runs 2 --no-profile
    dec direct $PWD/.abD1 $m --runs 2 --no-profile
    dec chunk1 $PWD $m --runs 2 --no-profile --hint decode_chunk=1
  done
  echo "round $round done $(date +%T)"
done
python3 - "$OUT/31j_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list); tok = collections.defaultdict(list); sub = {}
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        p50[key].append(d["p50_ms"]); tok[key].append(d["decode_tok_s"]); sub[key] = d["submits_per_token"]
for key in p50:
    print("%-16s %-8s p50 %s  tok/s %s  submits/token %.4f" % (key[0], key[1], " ".join("%.4f" % x for x in p50[key]),
          " ".join("%.1f" % x for x in tok[key]), sub[key]))
PY
tail -3 "$OUT/31j_err.txt"
