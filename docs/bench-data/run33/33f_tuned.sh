#!/usr/bin/env bash
# Run 33f (session 26), nvidia-h100-x1: `doppler tune --knobs lm_head_groups,gemv_rows` (the two knobs it scores
# by wall clock; --dry-run --json) on the four models of the issue-7 stage, then decode with its picks as --hint
# options against the defaults, two rounds. Why: 33e found Gemma Q4_K_M's LM head faster at 960 workgroups
# and no one value best for all four models; this is what the tuner makes of it per model.
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(( $(date +%s) - T0 )) s"
dec() {  # label model args...
  local label=$1 m=$2; shift 2
  timeout 60 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 --tokens 128 --runs 2 \
    --no-profile "$@" >>"$OUT/33f_decode.jsonl" 2>>"$OUT/33f_err.txt"
}
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf $G $L; do
  n=$(basename $m .gguf)
  timeout 120 $B tune --model $m --knobs lm_head_groups,gemv_rows --dry-run --json >/tmp/tune_$n.json 2>/tmp/tune_$n.txt
  { echo "== $m"; cat /tmp/tune_$n.txt /tmp/tune_$n.json; echo; } >>"$OUT/33f_tune.txt"
  H=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(' '.join('--hint %s=%s' % kv for kv in d['hints'].items()))" /tmp/tune_$n.json 2>/dev/null)
  echo "$n tuned: $H ($(( $(date +%s) - T0 )) s)"
  for round in 1 2; do
    dec default $m
    dec tuned $m $H
  done
done
python3 - "$OUT/33f_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list); tok = collections.defaultdict(list); hints = {}
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        p50[key].append(d["p50_ms"]); tok[key].append(d["decode_tok_s"]); hints[key] = d.get("hints")
for key in p50:
    print("%-16s %-8s p50 %s  tok/s %s  %s" % (key[0], key[1], " ".join("%.4f" % x for x in p50[key]),
          " ".join("%.1f" % x for x in tok[key]), hints[key]))
PY
tail -3 "$OUT/33f_err.txt"
echo "done $(( $(date +%s) - T0 )) s"
