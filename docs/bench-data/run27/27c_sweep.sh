#!/usr/bin/env bash
# Run 27c (session 20), nvidia-h100-x1: the side prefetcher on another compute family (27b: a second queue of
# the main family does not run beside it) across its settings, DOPPLER_SIDE_PREFETCH=depth,groups,wg,min_kb,max_mb;
# decode at the issue-7 shape, one binary, two rounds on Gemma 3 1B Q4_K_M, one on Llama Q4_K_M and Gemma F16;
# then one profiled pass each of none and the default setting.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
run() {  # setting model args...
  local s=$1 m=$2; shift 2
  DOPPLER_SIDE_PREFETCH=$s timeout 60 $B recipes/bench/decode.lua --model $m --label "pf=$s" --prompt-tokens 32 \
    --tokens 128 --runs 2 "$@" >>"$OUT/27c_decode.jsonl" 2>>"$OUT/err.txt"
}
SETS="0 1,32,256,256,24 1,8,256,256,24 1,16,256,256,24 1,64,256,256,24 1,132,256,256,24 1,32,128,256,24 1,32,512,256,24 1,32,1024,256,24 1,32,256,32,24 1,32,256,1024,24 1,32,256,256,8 1,32,256,256,48"
for round in 1 2; do for s in $SETS; do run $s /tmp/g1b-q4_k_m.gguf --no-profile; done; done
echo "gemma q4 done $(date +%T)"
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
for s in 0 1,32,256,256,24 1,16,256,256,24 1,64,256,256,24 1,32,512,256,24 0; do run $s /tmp/l1b-q4_k_m.gguf --no-profile; done
for s in 0 1,32,256,256,24 1,16,256,256,24 1,64,256,256,24 1,32,256,256,48 0; do run $s $G --no-profile; done
for s in 0 1,32,256,256,24; do run $s /tmp/g1b-q4_k_m.gguf --profile-tokens 16; done
python3 - "$OUT/27c_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = d.get("gpu_ms_per_kernel") or {}
        ks = " ".join("%s=%.3f" % (n, v) for n, v in sorted(k.items(), key=lambda x: -x[1])[:8]) if k else ""
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f p50 %.3f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0), ks)
PY
tail -5 "$OUT/err.txt" 2>/dev/null
