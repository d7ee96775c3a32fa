#!/usr/bin/env bash
# Run 29g (session 22), nvidia-h100-x1: fusion norm_qkv (the norm before the q/k/v pass computed in
# gemv_multi, DP_PRENORM) on top of norm_gate_up, against the tree before both (.abA, 7f7bebd), the new tree
# with norm_qkv off, and with both off; Q4_K_M and F16 models (norm_qkv applies to both; norm_gate_up to the
# Q4_K_M ones only); the driver's register counts of the q/k/v pipelines; decode at the issue-7 shape, two
# rounds; a profile of each tree; then the H100 tests the two fusions touch.
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
    --tokens 128 "$@" >>"$OUT/29g_decode.jsonl" 2>>"$OUT/29g_err.txt"
}
GQ=/tmp/g1b-q4_k_m.gguf LQ=/tmp/l1b-q4_k_m.gguf
for m in $GQ $LQ $G; do
  for t in old new; do
    home=$PWD; [ $t = old ] && home=$PWD/.abA
    DOPPLER_KERNEL_STATS=1 DOPPLER_CACHE_DIR=/tmp/dpc-stats-$t DOPPLER_HOME=$home timeout 60 $B recipes/bench/decode.lua \
      --model $m --label $t-stats --prompt-tokens 32 --tokens 16 --runs 1 --no-profile >/dev/null 2>/tmp/stats.txt
    echo "== $t $(basename $m)" >>"$OUT/29g_stats.txt"
    grep "kernel stats: gemv_multi" /tmp/stats.txt | grep -v DP_GLU | sed 's/Binary Size.*//' | sort -u >>"$OUT/29g_stats.txt"
  done
done
for round in 1 2; do
  for m in $GQ $LQ $G $L; do
    dec old $PWD/.abA $m --runs 2 --no-profile
    dec new $PWD $m --runs 2 --no-profile
    dec new-no-qkv $PWD $m --runs 2 --no-profile --hint fusion=-norm_qkv
    dec new-off $PWD $m --runs 2 --no-profile --hint fusion=-norm_qkv,-norm_gate_up
  done
done
for m in $GQ $LQ $G $L; do
  for t in old new; do
    home=$PWD; [ $t = old ] && home=$PWD/.abA
    dec $t-profile $home $m --runs 1 --profile-tokens 16
  done
done
echo "bench done $(date +%T)"
cat "$OUT/29g_stats.txt" | cut -c1-260
python3 - "$OUT/29g_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = d.get("gpu_ms_per_kernel") or {}
        ks = " ".join("%s=%.3f" % (n, v) for n, v in sorted(k.items(), key=lambda x: -x[1])[:8]) if k else ""
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f p50 %.3f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0), ks)
PY
for t in norm_gate_up gemma3_fixtures families_fixtures gguf_fixtures gpu_loop fuse_attn fusion_plugin; do
  timeout 300 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/29g_h100_tests.txt"
done
tail -5 "$OUT/29g_err.txt" 2>/dev/null
