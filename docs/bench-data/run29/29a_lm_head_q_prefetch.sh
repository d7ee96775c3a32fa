#!/usr/bin/env bash
# Run 29a (session 22), nvidia-h100-x1: the quantised LM head (fused/lm_head_q.comp) requests its next row
# block's units before summing the current one (and the first block's before the norm), against the tree
# before (7f7bebd: its lua/recipes/shaders in .abA, the same binary); decode at the issue-7 shape, two rounds;
# a profile of each; an lm_head_groups sweep; then the H100 tests the change touches.
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
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(date +%T)"
dec() {  # label home model args...
  local label=$1 home=$2 m=$3; shift 3
  DOPPLER_HOME=$home timeout 60 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 --runs 2 --no-profile "$@" >>"$OUT/29a_decode.jsonl" 2>>"$OUT/29a_err.txt"
}
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    dec old $PWD/.abA $m
    dec new $PWD $m
  done
done
for g in 512 2048; do dec new-groups$g $PWD /tmp/g1b-q4_k_m.gguf --hint lm_head_groups=$g; done
dec new-groups2048 $PWD /tmp/l1b-q4_k_m.gguf --hint lm_head_groups=2048
for t in old new; do
  home=$PWD; [ $t = old ] && home=$PWD/.abA
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    DOPPLER_HOME=$home timeout 60 $B recipes/bench/decode.lua --model $m --label $t-profile --prompt-tokens 32 \
      --tokens 128 --runs 1 --profile-tokens 16 >>"$OUT/29a_decode.jsonl" 2>>"$OUT/29a_err.txt"
  done
done
echo "bench done $(date +%T)"
python3 - "$OUT/29a_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = d.get("gpu_ms_per_kernel") or {}
        ks = " ".join("%s=%.3f" % (n, v) for n, v in sorted(k.items(), key=lambda x: -x[1])[:7]) if k else ""
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f p50 %.3f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0), ks)
PY
for t in lm_head_fusion gguf_fixtures gpu_loop; do
  timeout 300 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/29a_h100_tests.txt"
done
tail -5 "$OUT/29a_err.txt" 2>/dev/null
