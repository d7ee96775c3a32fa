#!/usr/bin/env bash
# Run 29h (session 22), nvidia-h100-x1: the session's tree as committed (norm_gate_up, and norm_qkv for Gemma's
# sandwich norm only) against the tree before (.abA, 7f7bebd) at the issue-7 shape on all four models, two
# rounds; then the issue-7 stage of scripts/device/h100-bench.sh (the table in docs/BENCHMARKS.md); then the
# H100 tests the fusions touch.
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
    --tokens 128 "$@" >>"$OUT/29h_decode.jsonl" 2>>"$OUT/29h_err.txt"
}
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf $G $L; do
    dec old $PWD/.abA $m --runs 2 --no-profile
    dec new $PWD $m --runs 2 --no-profile
  done
done
python3 - "$OUT/29h_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f p50 %.3f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0))
PY
echo "a/b done $(date +%T)"
mkdir -p "$OUT/issue7"
OUT=$OUT/issue7 STAGES=issue7 B=$B bash scripts/device/h100-bench.sh 2>&1 | tail -20
echo "issue7 done $(date +%T)"
for t in norm_gate_up gemma3_fixtures families_fixtures gguf_fixtures gpu_loop fuse_attn fusion_plugin lm_head_fusion kernels; do
  timeout 300 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/29h_h100_tests.txt"
done
tail -5 "$OUT/29h_err.txt" 2>/dev/null
