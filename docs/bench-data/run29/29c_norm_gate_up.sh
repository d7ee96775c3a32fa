#!/usr/bin/env bash
# Run 29c (session 22), nvidia-h100-x1: fusion norm_gate_up (the norm before gate+up computed in gemv_q's
# staging, DP_PRENORM) against the tree before (7f7bebd's lua/recipes/shaders in .abA, the same binary) and
# against itself with the fusion off; the same with bigger gate+up workgroups (hints gemv_q_wg / gemv_q_rows,
# which the quantised head takes too: compare on and off at one layout); and 29b's bound again, correctly
# this time (.abB: 7f7bebd with DP_X_SKIP_NORMS=1 recording no decode norm at all; wrong results). Decode at
# the issue-7 shape, two rounds; a profile of each tree; then the H100 tests the change touches.
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
    --tokens 128 "$@" >>"$OUT/29c_decode.jsonl" 2>>"$OUT/29c_err.txt"
}
GQ=/tmp/g1b-q4_k_m.gguf LQ=/tmp/l1b-q4_k_m.gguf
for round in 1 2; do
  for m in $GQ $LQ; do
    dec old $PWD/.abA $m --runs 2 --no-profile
    dec new $PWD $m --runs 2 --no-profile
    dec new-off $PWD $m --runs 2 --no-profile --hint fusion=-norm_gate_up
    dec bound-norms $PWD/.abB $m --runs 2 --no-profile
    DP_X_SKIP_NORMS=1 dec bound-skip $PWD/.abB $m --runs 2 --no-profile
  done
done
for lay in 256,16 512,32; do
  for m in $GQ $LQ; do
    h="--hint gemv_q_wg=${lay%,*} --hint gemv_q_rows=${lay#*,}"
    dec "new-wg$lay" $PWD $m --runs 2 --no-profile $h
    dec "new-off-wg$lay" $PWD $m --runs 2 --no-profile $h --hint fusion=-norm_gate_up
  done
done
for m in $GQ $LQ; do
  dec old-profile $PWD/.abA $m --runs 1 --profile-tokens 16
  dec new-profile $PWD $m --runs 1 --profile-tokens 16
done
echo "bench done $(date +%T)"
python3 - "$OUT/29c_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = d.get("gpu_ms_per_kernel") or {}
        ks = " ".join("%s=%.3f" % (n, v) for n, v in sorted(k.items(), key=lambda x: -x[1])[:8]) if k else ""
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f p50 %.3f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0), ks)
PY
for t in norm_gate_up gguf_fixtures gemma3_fixtures families_fixtures gpu_loop quant_linear; do
  timeout 300 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/29c_h100_tests.txt"
done
tail -5 "$OUT/29c_err.txt" 2>/dev/null
