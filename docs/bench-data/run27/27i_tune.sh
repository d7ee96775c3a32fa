#!/usr/bin/env bash
# Run 27i (session 20), nvidia-h100-x1: doppler tune's new knobs (side_prefetch, prefetch_groups) on Gemma 3 1B
# Q4_K_M and F16, --dry-run (nothing written), then the decode bench with the F16 winner against the defaults.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
for m in /tmp/g1b-q4_k_m.gguf $G; do
  timeout 200 $B tune --model $m --knobs side_prefetch,prefetch_groups --dry-run 2>&1 | tee -a "$OUT/27i_tune.txt"
done
for round in 1 2; do
  for g in 0 48 64; do
    timeout 60 $B recipes/bench/decode.lua --model $G --label "prefetch_groups=$g" --prompt-tokens 32 --tokens 128 \
      --runs 2 --no-profile --hint prefetch_groups=$g >>"$OUT/27i_decode.jsonl" 2>>"$OUT/err.txt"
  done
done
python3 - "$OUT/27i_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f p50 %.3f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0))
PY
tail -3 "$OUT/err.txt" 2>/dev/null
