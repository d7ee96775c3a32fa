#!/usr/bin/env bash
# Run 21e (session 14): attention_splits (most key chunks per kv head and token) under the new auto, at the
# issue-7 shape (Q4_K_M) and at a 2048-token context (F16), with attention_unroll=2 at long range.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler
B=$PWD/build-h100/doppler G=/tmp/g1b L=/tmp/l1b
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1 &
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1 &
wait
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet &
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet &
wait
run() {  # file model label args...
  local f=$1 m=$2 label=$3; shift 3
  timeout 150 $B recipes/bench/decode.lua --model $m --label "$label" "$@" >>"$OUT/$f" 2>>"$OUT/err.txt"
}
S="--prompt-tokens 32 --tokens 128 --runs 2"
LONG="--prompt-tokens 2048 --tokens 128 --runs 2 --hint context=4096"
run 21e_short.jsonl /tmp/g1b-q4_k_m.gguf warm $S
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    run 21e_short.jsonl $m default $S
    for s in 8 16 32; do run 21e_short.jsonl $m splits$s $S --hint attention_splits=$s; done
  done
done
for m in $G $L; do
  run 21e_long.jsonl $m default $LONG
  for s in 16 32 64; do run 21e_long.jsonl $m splits$s $LONG --hint attention_splits=$s; done
  run 21e_long.jsonl $m uk2 $LONG --hint attention_unroll=2
done
python3 - "$OUT/21e_short.jsonl" "$OUT/21e_long.jsonl" <<'PY'
import json, sys
for f in sys.argv[1:]:
    runs = {}
    for l in open(f):
        if l.startswith("{"):
            d = json.loads(l)
            k = (d["model"].split("/")[-1], d["label"])
            r = runs.setdefault(k, {"tok": [], "attn": []})
            r["tok"].append(d["decode_tok_s"] or 0)
            if d.get("gpu_ms_per_kernel"): r["attn"].append(d["gpu_ms_per_kernel"].get("attention_decode"))
    print(f.split("/")[-1])
    for (m, lab), r in runs.items():
        print("%-16s %-8s decode %s  attention_decode %s" % (m[:16], lab, " / ".join("%.1f" % t for t in r["tok"]),
              " / ".join("%.3f" % a for a in r["attn"] if a)))
PY
tail -3 "$OUT/err.txt" 2>/dev/null
