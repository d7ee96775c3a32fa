#!/usr/bin/env bash
# Run 27b (session 20), nvidia-h100-x1: 27a's side prefetcher never ran beside the main queue (every chunk
# waited for the side kernel's spin limit). Which queue runs beside the main one: a second queue of the main
# family (PF_SIDE_FAMILY=same) or another compute family (default)? PF_DEBUG prints each chunk's give-ups.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
echo "model ready $(date +%T)"
VK_LOADER_DEBUG=none timeout 20 $B devices 2>&1 | head -5
M=/tmp/g1b-q4_k_m.gguf
for fam in other same; do
  for s in 1,32,256,256,24 2,32,256,256,24; do
    PF_SIDE_FAMILY=$fam PF_DEBUG=1 DOPPLER_SIDE_PREFETCH=$s timeout 60 $B run --model $M --ids 2,3,4,5,6,7,8,9 \
      --max-tokens 64 --print-ids >"$OUT/27b_${fam}_${s//,/_}.txt" 2>&1
    echo "== $fam $s: $(grep -c 'gave up 1' "$OUT/27b_${fam}_${s//,/_}.txt") give-ups, $(grep -c 'gave up 0' "$OUT/27b_${fam}_${s//,/_}.txt") clean; $(tail -1 "$OUT/27b_${fam}_${s//,/_}.txt")"
    grep "gave up" "$OUT/27b_${fam}_${s//,/_}.txt" | head -3
    PF_SIDE_FAMILY=$fam DOPPLER_SIDE_PREFETCH=$s timeout 60 $B recipes/bench/decode.lua --model $M --label "$fam pf=$s" \
      --prompt-tokens 32 --tokens 128 --runs 2 --no-profile >>"$OUT/27b_decode.jsonl" 2>>"$OUT/err.txt"
  done
done
timeout 60 $B recipes/bench/decode.lua --model $M --label "pf=0" --prompt-tokens 32 --tokens 128 --runs 2 \
  --no-profile >>"$OUT/27b_decode.jsonl" 2>>"$OUT/err.txt"
python3 - "$OUT/27b_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f p50 %.3f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0))
PY
tail -5 "$OUT/err.txt" 2>/dev/null
