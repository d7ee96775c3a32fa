#!/usr/bin/env bash
# Run 31h (session 24), nvidia-h100-x1: `doppler tune --wall` (every knob scored by wall clock) on the models
# named by MODELS (default the two Q4_K_M; TUNE_ARGS adds e.g. --quick), --dry-run; then decode with the
# defaults against what it picked, two rounds. Tree: HEAD (9a309bd: linears at one row by default).
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
TAG=${TAG:-31h}
dec() {  # label model args...
  local label=$1 m=$2; shift 2
  timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 --tokens 128 "$@" \
    >>"$OUT/${TAG}_decode.jsonl" 2>>"$OUT/${TAG}_err.txt"
}
for m in ${MODELS:-/tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf}; do
  n=$(basename $m .gguf)
  timeout ${TUNE_S:-230} $B tune --model $m --wall --dry-run --json ${TUNE_ARGS:-} >/tmp/tune_$n.json 2>/tmp/tune_$n.txt
  { echo "== $n"; cat /tmp/tune_$n.txt /tmp/tune_$n.json; } >>"$OUT/${TAG}_tune.txt"
  H=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' '.join('--hint %s=%s' % kv for kv in d['hints'].items()))" /tmp/tune_$n.json)
  echo "$n tuned ($(( $(date +%s) - T0 )) s): $H"
  for round in 1 2; do
    dec default $m --runs 2 --no-profile
    dec tuned $m --runs 2 --no-profile $H
  done
done
python3 - "$OUT/${TAG}_decode.jsonl" <<'PY'
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
tail -3 "$OUT/${TAG}_err.txt"
echo "done $(date +%T), $(( $(date +%s) - T0 )) s"
