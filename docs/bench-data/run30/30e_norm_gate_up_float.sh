#!/usr/bin/env bash
# Run 30e (session 23), nvidia-h100-x1: norm_gate_up on the float gate+up pass (gemv_multi.comp DP_PRENORM=1|2,
# one-token passes; with the first weight loads issued before the norm's reduction) against the tree before
# (.abA = git archive bde8d67 lua recipes shaders models), on Gemma 3 1B and Llama 3.2 1B, F16 and Q4_K_M (whose
# gate+up runs gemv_q and already folds its norm), two rounds; the new tree with fusion=-norm_gate_up (the
# hoisted loads alone); profiles; the H100 tests the change touches.
set -u
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
    --tokens 128 "$@" >>"$OUT/30e_decode.jsonl" 2>>"$OUT/30e_err.txt"
}
for round in 1 2; do
  for m in $G $L /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    dec old $PWD/.abA $m --runs 2 --no-profile
    dec new $PWD $m --runs 2 --no-profile
  done
  for m in $G $L; do dec new-nofold $PWD $m --runs 2 --no-profile --hint fusion=-norm_gate_up; done
done
for m in $G $L; do
  dec old-profile $PWD/.abA $m --runs 1 --profile-tokens 64
  dec new-profile $PWD $m --runs 1 --profile-tokens 64
done
python3 - "$OUT/30e_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["model"].split("/")[-1][:16], "%-12s" % d["label"], "decode %.1f p50 %.4f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0))
        k = d.get("gpu_ms_per_kernel") or {}
        for n, v in sorted(k.items(), key=lambda x: -x[1])[:8]: print("    %-30s %.4f" % (n, v))
PY
echo "a/b done $(date +%T)"
for t in norm_gate_up gemma3_fixtures families_fixtures fuse_attn gpu_loop gguf_fixtures kernels; do
  timeout 300 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/30e_h100_tests.txt"
done
tail -3 "$OUT/30e_err.txt"
