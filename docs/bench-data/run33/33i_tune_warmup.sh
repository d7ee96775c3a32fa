#!/usr/bin/env bash
# Run 33i (session 26), nvidia-h100-x1: doppler tune's untimed warm-up before each wall-clock candidate
# (--warmup-ms, 300 by default on a GPU) against none (--warmup-ms 0, the old behaviour but for one untimed
# run), `--knobs lm_head_groups,gemv_rows --dry-run --json`, on the two Q4_K_M models; then test_tune.
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
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
  for w in 0 default 0 default; do
    a=""; [ $w = default ] || a="--warmup-ms $w"
    { echo "== $m warmup $w"; timeout 120 $B tune --model $m --knobs lm_head_groups,gemv_rows --dry-run --json $a 2>&1; echo; } >>"$OUT/33i_tune.txt"
  done
done
python3 - "$OUT/33i_tune.txt" <<'PY'
import json, sys
head = None
for l in open(sys.argv[1]):
    if l.startswith("== "): head = l[3:].strip()
    elif l.startswith("{"):
        d = json.loads(l)
        print(head, d["hints"], " ".join("%s=%s:%.3f(%s)" % (r["knob"][:4], r["value"], r["score"], r.get("warmup_runs")) for r in d["results"]))
PY
timeout 200 $B tests/lua/test_tune.lua >"$OUT/33i_h100_t_tune.txt" 2>&1; echo "test_tune: $(tail -1 $OUT/33i_h100_t_tune.txt)"
echo "done $(( $(date +%s) - T0 )) s"
