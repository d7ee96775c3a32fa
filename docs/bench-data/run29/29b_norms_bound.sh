#!/usr/bin/env bash
# Run 29b (session 22), nvidia-h100-x1: an upper bound for folding the decode norms into the GEMVs. The tree
# at 7f7bebd (.abB) with a timing-only switch in doppler.lower (DP_X_SKIP_NORMS: add_rmsnorm and norm_add_norm
# record nothing for one-token passes, so the results are wrong): decode with and without the norm
# dispatches, two rounds, and one profile each.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler H=$PWD/.abB
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(date +%T)"
dec() {  # label skip model args...
  local label=$1 skip=$2 m=$3; shift 3
  DP_X_SKIP_NORMS=$skip DOPPLER_HOME=$H timeout 60 $B recipes/bench/decode.lua --model $m --label "$label" \
    --prompt-tokens 32 --tokens 128 "$@" >>"$OUT/29b_decode.jsonl" 2>>"$OUT/29b_err.txt"
}
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf $G $L; do
    dec norms "" $m --runs 2 --no-profile
    dec skip 1 $m --runs 2 --no-profile
  done
done
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
  dec norms-profile "" $m --runs 1 --profile-tokens 16
  dec skip-profile 1 $m --runs 1 --profile-tokens 16
done
echo "bench done $(date +%T)"
python3 - "$OUT/29b_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = d.get("gpu_ms_per_kernel") or {}
        ks = " ".join("%s=%.3f" % (n, v) for n, v in sorted(k.items(), key=lambda x: -x[1])[:8]) if k else ""
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f p50 %.3f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0), ks)
PY
tail -5 "$OUT/29b_err.txt" 2>/dev/null
