#!/usr/bin/env bash
# Run 24h (session 17), nvidia-h100-x1: the shaders now spell their unroll hints DP_UNROLL ([[unroll]] on a GPU,
# dp_common.glsl) and the GEMM's tile comes from lower.gemm_tile; neither should change a GPU plan. The H100 runs
# the tests of the touched kernels, then Gemma 3 1B Q4_K_M and F16 decode (issue-7 shape) with the tree before
# (cf890ff, in .abA) and this one, one binary, DOPPLER_HOME per tree, two rounds.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
$B devices 2>&1 | head -3
for t in kernels gemm_cm attention_cm gemv_q8 quant_linear fuse_attn lm_head_fusion gemma3_fixtures gpu_loop gguf_fixtures; do
  timeout 300 $B tests/lua/test_$t.lua >"$OUT/24h_t_$t.txt" 2>&1; echo "test_$t: $(tail -1 "$OUT/24h_t_$t.txt")"
done
G=/tmp/g1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf $G; do
    for tree in old new; do
      home=$PWD; [ $tree = old ] && home=$PWD/.abA
      DOPPLER_HOME=$home timeout 150 $B recipes/bench/decode.lua --model $m --label $tree --prompt-tokens 32 \
        --tokens 128 --runs 2 --no-profile >>"$OUT/24h_decode.jsonl" 2>>"$OUT/err.txt"
    done
  done
done
python3 - "$OUT/24h_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f p50 %.3f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0))
PY
