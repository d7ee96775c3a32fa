#!/usr/bin/env bash
# Run 28e (session 21), nvidia-h100-x1: the persistent-kernel probe with an attention step per layer (a fixed
# cache of 96 or 160 positions; 5 steps per layer), the default `fence` barrier, against the dispatch chain, two
# rounds; then doppler's own decode of the same two models at the issue-7 shape on the same machine.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
J=$OUT/28e_probe.jsonl
(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 || true) | head -1
p() { echo "# $*" >>"$OUT/err.txt"; timeout 120 $B recipes/bench/persistent.lua "$@" >>"$J" 2>>"$OUT/err.txt"; }
for round in 1 2; do
  for s in llama gemma; do
    for w in f16 q4; do
      for ctx in 96 160; do p --shape $s --weights $w --context $ctx --label r$round; done
    done
  done
done
python3 - "$J" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d = json.loads(l)
    print("%-3s %-6s %-4s ctx=%-4s %-11s %.4f ms/tok  %7.1f tok/s  %6.1f GB/s  %.2f us/step" % (
        d.get("label"), d["shape"], d["weights"], d["context"], d["mode"], d["ms_per_token"],
        d["tok_s"], d["gb_s"], d["us_per_step"]))
PY
grep -v '^#' "$OUT/err.txt" | tail -3
echo "probe done $(date +%T)"
G=/tmp/g1b L=/tmp/l1b
timeout 150 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
timeout 100 $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
timeout 150 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
timeout 100 $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(date +%T)"
for m in /tmp/l1b-q4_k_m.gguf $L /tmp/g1b-q4_k_m.gguf $G; do
  timeout 60 $B recipes/bench/decode.lua --model $m --label engine --prompt-tokens 32 --tokens 128 --runs 3 \
    --no-profile >>"$OUT/28e_decode.jsonl" 2>>"$OUT/err.txt"
done
python3 - "$OUT/28e_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l); print(d["label"], d["model"], d["decode_tok_s"], d["p50_ms"])
PY
echo "all done $(date +%T)"
