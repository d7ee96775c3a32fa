#!/usr/bin/env bash
# Run 35e (session 28), nvidia-h100-x1: the committed tree (the early loads of 35d only where a is an activation
# row) against cf416b2 (.abX, `git archive cf416b2 shaders lua recipes models`), three rounds of 2 runs on the
# Gemma 3 1B models; then the issue-7 stage on the committed tree and the H100 tests (one file).
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b
export DOPPLER_HOME=$PWD
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(( $(date +%s) - T0 )) s"
dec() {  # label home model args...
  local label=$1 home=$2 m=$3; shift 3
  DOPPLER_HOME=$home timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 "$@" >>"$OUT/35e_decode.jsonl" 2>>"$OUT/35e_err.txt"
}
for round in 1 2 3; do
  for m in $G /tmp/g1b-q4_k_m.gguf; do
    dec old $PWD/.abX $m --runs 2 --no-profile
    dec new $PWD $m --runs 2 --no-profile
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
python3 - "$OUT/35e_decode.jsonl" > "$OUT/35e_summary.txt" <<'PY'
import json, sys, collections, statistics
p50 = collections.defaultdict(list); tok = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        p50[key].append(d["p50_ms"]); tok[key].append(d["decode_tok_s"])
for key in p50:
    print("%-16s %-4s p50 %s  tok/s %s  median %.4f" % (key[0], key[1], " ".join("%.4f" % x for x in p50[key]), " ".join("%.1f" % x for x in tok[key]), statistics.median(p50[key])))
PY
cat "$OUT/35e_summary.txt"
H=$PWD
OUT=$OUT/35e_issue7 DOPPLER_HOME=$H STAGES="issue7" bash scripts/device/h100-bench.sh 2>&1 | tail -24
echo "issue7 done $(( $(date +%s) - T0 )) s"
for t in norm_gate_up gguf_fixtures gemma3_fixtures fuse_attn; do
  echo "== test_$t" >>"$OUT/35e_h100_tests.txt"
  timeout 200 $B tests/lua/test_$t.lua >>"$OUT/35e_h100_tests.txt" 2>&1; echo "$t: $(tail -1 "$OUT/35e_h100_tests.txt")"
done
echo "done $(( $(date +%s) - T0 )) s"
