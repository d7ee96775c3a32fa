#!/usr/bin/env bash
# Run 29k (session 22), nvidia-h100-x1: after the review commits (act_round in dp_types.glsl, produced_by moving
# an output between fused writers): the H100 tests those touch, and decode of Gemma 3 1B Q4_K_M and F16 at the
# issue-7 shape (one round, two runs) as a check that nothing moved.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for t in norm_gate_up lm_head_fusion fuse_attn gemma3_fixtures gguf_fixtures; do
  timeout 300 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/29k_h100_tests.txt"
done
G=/tmp/g1b
timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
$B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
for m in /tmp/g1b-q4_k_m.gguf $G; do
  timeout 60 $B recipes/bench/decode.lua --model $m --label review --prompt-tokens 32 --tokens 128 --runs 2 \
    --no-profile >>"$OUT/29k_decode.jsonl" 2>>"$OUT/29k_err.txt"
done
python3 - "$OUT/29k_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f p50 %.3f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0))
PY
