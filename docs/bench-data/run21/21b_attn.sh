#!/usr/bin/env bash
# Run 21b (session 14): attention_heads=1 against workgroup size, keys per round and chunk size, finer than 21a;
# the Gemma 3 1B Q4_K_M conversion for the issue-7 shape. Same machine as 21a (warm: the models are kept).
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler
B=$PWD/build-h100/doppler G=/tmp/g1b L=/tmp/l1b
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || timeout 300 $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet &
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2"
run() {  # model label hints...
  local m=$1 label=$2; shift 2
  local hs=""; for kv in "$@"; do hs="$hs --hint $kv"; done
  timeout 120 $B $D --model $m $hs --label "$label" >>"$OUT/21b_attn.jsonl" 2>>"$OUT/err.txt"
}
run $G warm
while read -r label hints; do run $G "$label" $hints; done <<'LIST'
default
h1-uk1 attention_heads=1 attention_unroll=1
h1-uk1-wg128 attention_heads=1 attention_unroll=1 attention_wg=128
h1-uk1-wg64 attention_heads=1 attention_unroll=1 attention_wg=64
h1-uk1-wg32 attention_heads=1 attention_unroll=1 attention_wg=32
h1-uk1-wg512 attention_heads=1 attention_unroll=1 attention_wg=512
h1-wg128 attention_heads=1 attention_wg=128
h1-wg64 attention_heads=1 attention_wg=64
h1-uk1-mc16 attention_heads=1 attention_unroll=1 attention_min_chunk=16
h1-uk1-mc4 attention_heads=1 attention_unroll=1 attention_min_chunk=4
h1-uk1-lk16 attention_heads=1 attention_unroll=1 attention_lanes=16
h2-uk1 attention_heads=2 attention_unroll=1
h4-uk1 attention_unroll=1
default-again
LIST
while read -r label hints; do run $L "$label" $hints; done <<'LIST'
default
h1 attention_heads=1
h1-uk1 attention_heads=1 attention_unroll=1
h1-wg128 attention_heads=1 attention_wg=128
h1-uk1-wg128 attention_heads=1 attention_unroll=1 attention_wg=128
h1-wg64 attention_heads=1 attention_wg=64
h1-uk1-wg64 attention_heads=1 attention_unroll=1 attention_wg=64
h1-uk4-wg64 attention_heads=1 attention_unroll=4 attention_wg=64
h1-uk1-lk4 attention_heads=1 attention_unroll=1 attention_lanes=4
default-again
LIST
wait
for label in default h1-uk1 h1-uk1-wg128; do
  case $label in default) hs="" ;; h1-uk1) hs="attention_heads=1 attention_unroll=1" ;;
                 h1-uk1-wg128) hs="attention_heads=1 attention_unroll=1 attention_wg=128" ;; esac
  run /tmp/g1b-q4_k_m.gguf "q4km-$label" $hs
done
python3 - "$OUT/21b_attn.jsonl" <<'PY'
import json, sys
runs = {}
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = (d["model"].split("/")[-1], d["label"])
        r = runs.setdefault(k, {"tok": [], "attn": None, "gpu": None})
        r["tok"].append(d["decode_tok_s"] or 0)
        if d.get("gpu_ms_per_kernel"):
            r["attn"] = d["gpu_ms_per_kernel"].get("attention_decode")
            r["gpu"] = d.get("gpu_ms_per_token")
for (m, lab), r in runs.items():
    print("%-5s %-20s decode %s  attention_decode %s ms/tok  gpu %s ms/tok" % (m[:12], lab, " / ".join("%.1f" % t for t in r["tok"]),
          "%.3f" % r["attn"] if r["attn"] else "-", "%.3f" % r["gpu"] if r["gpu"] else "-"))
PY
tail -5 "$OUT/err.txt" 2>/dev/null
