#!/usr/bin/env bash
# Run 30f (session 23), nvidia-h100-x1: the three small folds of this session (lm_head_pre 71c3340, the GPU
# loop's advance running argmax_final d60060e, embed_norm f305c17) against the tree before (.abA = git archive
# bde8d67 lua recipes shaders models; the binary has no C change), on Gemma 3 1B and Llama 3.2 1B, Q4_K_M and
# F16, two rounds; the new tree with each fusion off; a profile; the H100 tests they touch; then, if the
# call has time left, the issue-7 stage of scripts/device/h100-bench.sh.
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
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
  DOPPLER_HOME=$home timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 "$@" >>"$OUT/30f_decode.jsonl" 2>>"$OUT/30f_err.txt"
}
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf $G $L; do
    dec old $PWD/.abA $m --runs 2 --no-profile
    dec new $PWD $m --runs 2 --no-profile
  done
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    dec new-no-lm_head_pre $PWD $m --runs 2 --no-profile --hint fusion=-lm_head_pre
    dec new-no-embed_norm $PWD $m --runs 2 --no-profile --hint fusion=-embed_norm
  done
done
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do dec new-profile $PWD $m --runs 1 --profile-tokens 64; done
python3 - "$OUT/30f_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["model"].split("/")[-1][:16], "%-20s" % d["label"], "decode %.1f p50 %.4f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0))
        k = d.get("gpu_ms_per_kernel") or {}
        for n, v in sorted(k.items(), key=lambda x: -x[1]): print("    %-30s %.4f" % (n, v))
PY
echo "a/b done $(date +%T)"
for t in embed_norm lm_head_fusion gpu_loop gemma3_fixtures families_fixtures gguf_fixtures fuse_attn side_prefetch kernels; do
  timeout 300 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/30f_h100_tests.txt"
done
tail -3 "$OUT/30f_err.txt"
echo "tests done $(date +%T), $(( $(date +%s) - T0 )) s"
if [ $(( $(date +%s) - T0 )) -lt 380 ]; then
  mkdir -p "$OUT/issue7"
  OUT=$OUT/issue7 STAGES=issue7 B=$B bash scripts/device/h100-bench.sh 2>&1 | tail -12
  echo "issue7 done $(date +%T)"
fi
