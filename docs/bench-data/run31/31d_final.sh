#!/usr/bin/env bash
# Run 31d (session 24), nvidia-h100-x1: the session's tree (HEAD) against the tree at its start (.abA = git
# archive 84bae02 lua recipes shaders models; the binary has no C change) on Gemma 3 1B Q4_K_M, Llama 3.2 1B
# Q4_K_M and Gemma 3 1B F16, two rounds; `doppler tune --knobs lm_head_groups,gemv_rows` on the two Q4_K_M
# models (--dry-run) and decode with what it picked; the issue-7 stage of scripts/device/h100-bench.sh; then,
# if the call has time left, the H100 tests the session's changes touch.
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
    --tokens 128 "$@" >>"$OUT/31d_decode.jsonl" 2>>"$OUT/31d_err.txt"
}
GQ=/tmp/g1b-q4_k_m.gguf LQ=/tmp/l1b-q4_k_m.gguf
for round in 1 2; do
  for m in $GQ $LQ $G; do
    dec old $PWD/.abA $m --runs 2 --no-profile
    dec new $PWD $m --runs 2 --no-profile
  done
done
echo "a/b done $(date +%T)"
for m in $GQ $LQ; do
  n=$(basename $m .gguf)
  timeout 150 $B tune --model $m --knobs lm_head_groups,gemv_rows --dry-run --json >"$OUT/31d_tune_$n.json" 2>"$OUT/31d_tune_$n.txt"
  tail -2 "$OUT/31d_tune_$n.txt"
  H=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' '.join('--hint %s=%s' % kv for kv in d['hints'].items()))" "$OUT/31d_tune_$n.json")
  echo "$n tuned: $H"
  for round in 1 2; do
    dec new $PWD $m --runs 2 --no-profile
    dec tuned $PWD $m --runs 2 --no-profile $H
  done
done
python3 - "$OUT/31d_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list); tok = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        p50[key].append(d["p50_ms"]); tok[key].append(d["decode_tok_s"])
for key in p50:
    print("%-16s %-8s p50 %s  tok/s %s" % (key[0], key[1], " ".join("%.4f" % x for x in p50[key]),
          " ".join("%.1f" % x for x in tok[key])))
PY
echo "tune done $(date +%T), $(( $(date +%s) - T0 )) s"
mkdir -p "$OUT/issue7"
OUT=$OUT/issue7 STAGES=issue7 B=$B bash scripts/device/h100-bench.sh 2>&1 | tail -9
echo "issue7 done $(date +%T), $(( $(date +%s) - T0 )) s"
for t in gemv_q8 norm_gate_up gguf_fixtures tune quant_linear; do
  [ $(( $(date +%s) - T0 )) -lt 520 ] || { echo "no time for test_$t"; continue; }
  timeout 120 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/31d_h100_tests.txt"
done
tail -3 "$OUT/31d_err.txt"
echo "done $(date +%T), $(( $(date +%s) - T0 )) s"
