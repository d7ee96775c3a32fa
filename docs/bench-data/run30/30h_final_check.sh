#!/usr/bin/env bash
# Run 30h (session 23), nvidia-h100-x1: the committed tree after ab3ea3a (lm_head_pre's pre-sum precise,
# test_embed_norm's GPU bound): the H100 tests the session's changes touch, and decode on the four models
# (one round) to check that the precise prologue cost nothing against 30f's "new".
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for t in embed_norm lm_head_fusion gpu_loop gemma3_fixtures families_fixtures gguf_fixtures fuse_attn; do
  timeout 300 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/30h_h100_tests.txt"
done
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf $G $L; do
  timeout 90 $B recipes/bench/decode.lua --model $m --label final --prompt-tokens 32 --tokens 128 --runs 2 \
    --no-profile >>"$OUT/30h_decode.jsonl" 2>>"$OUT/30h_err.txt"
done
python3 - "$OUT/30h_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["model"].split("/")[-1][:16], "%-6s" % d["label"], "decode %.1f p50 %.4f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0))
PY
