#!/usr/bin/env bash
# Run 27f (session 20), nvidia-h100-x1: the side prefetcher as committed (hint side_prefetch, auto: on for decode
# passes where the device has a second compute family) against the tree before it (71da09b: its binary in
# build-h100-old, its lua/recipes/shaders in .abA) and against itself with side_prefetch=off; decode at the
# issue-7 shape, two rounds; prefill and TTFT once each; then the H100 tests with the defaults (prefetch on).
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler A=$PWD/build-h100-old/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(date +%T)"
$B devices 2>&1 | grep -i "side queue"
dec() {  # label binary home model args...
  local label=$1 bin=$2 home=$3 m=$4; shift 4
  DOPPLER_HOME=$home timeout 60 $bin recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 --runs 2 --no-profile "$@" >>"$OUT/27f_decode.jsonl" 2>>"$OUT/err.txt"
}
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf $G; do
    dec old $A $PWD/.abA $m
    dec new $B $PWD $m
    dec new-off $B $PWD $m --hint side_prefetch=off
  done
done
for m in /tmp/g1b-q4_k_m.gguf $G; do
  for t in old new; do
    bin=$B home=$PWD; [ $t = old ] && bin=$A home=$PWD/.abA
    DOPPLER_HOME=$home timeout 100 $bin recipes/bench/prefill.lua --model $m --label $t >>"$OUT/27f_prefill.jsonl" 2>>"$OUT/err.txt"
    DOPPLER_HOME=$home timeout 100 $bin recipes/bench/ttft.lua --model $m --label $t >>"$OUT/27f_prefill.jsonl" 2>>"$OUT/err.txt"
  done
done
timeout 60 $B recipes/bench/decode.lua --model /tmp/g1b-q4_k_m.gguf --label new-profile --prompt-tokens 32 --tokens 128 \
  --runs 1 --profile-tokens 16 >>"$OUT/27f_decode.jsonl" 2>>"$OUT/err.txt"
echo "bench done $(date +%T)"
python3 - "$OUT/27f_decode.jsonl" "$OUT/27f_prefill.jsonl" <<'PY'
import json, sys
for f in sys.argv[1:]:
  for l in open(f):
    if l.startswith("{"):
        d = json.loads(l)
        k = d.get("gpu_ms_per_kernel") or {}
        ks = " ".join("%s=%.3f" % (n, v) for n, v in sorted(k.items(), key=lambda x: -x[1])[:8]) if k else ""
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f prefill %.0f ttft %.2f p50 %.3f subm %.4f" % (d["decode_tok_s"] or 0, d["prefill_tok_s"] or 0, d["ttft_ms"] or 0, d["p50_ms"] or 0, d["submits_per_token"] or 0), ks)
PY
for t in side_prefetch gpu_loop gguf_fixtures gemma3_fixtures families_fixtures lm_head_fusion fuse_attn bench; do
  timeout 300 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/27f_h100_tests.txt"
done
tail -5 "$OUT/err.txt" 2>/dev/null
