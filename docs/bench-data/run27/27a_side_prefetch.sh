#!/usr/bin/env bash
# Run 27a (session 20), nvidia-h100-x1: the side prefetcher (gpu/prefetch.c, DOPPLER_SIDE_PREFETCH=
# depth,groups,wg,min_kb,max_mb) against none, one binary, decode at the issue-7 shape; then the same greedy ids
# with and without it, and H100 tests with it on.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(date +%T)"
run() {  # setting model args...
  local s=$1 m=$2; shift 2
  DOPPLER_SIDE_PREFETCH=$s timeout 100 $B recipes/bench/decode.lua --model $m --label "pf=$s" --prompt-tokens 32 \
    --tokens 128 --runs 2 "$@" >>"$OUT/27a_decode.jsonl" 2>>"$OUT/err.txt"
}
SETS=${SETS:-"0 1,32,256,256,24 2,32,256,256,24 3,32,256,256,24 1,16,256,256,24 1,64,256,256,24 2,64,256,256,40"}
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    for s in $SETS; do run $s $m --no-profile; done
  done
done
for s in $SETS; do run $s $G --no-profile; done
echo "sweep done $(date +%T)"
python3 - "$OUT/27a_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f p50 %.3f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0))
PY
tail -5 "$OUT/err.txt" 2>/dev/null
