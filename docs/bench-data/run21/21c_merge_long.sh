#!/usr/bin/env bash
# Run 21c (session 14): (1) the merge's batch MB = 64 / EPT (every chunk in one round trip where an invocation
# has one output element) against MB = 16 (the tree in .abA), one binary, DOPPLER_HOME per tree, two rounds;
# (2) 2048-token contexts: attention_heads / attention_unroll / attention_wg at long range.
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
run() {  # file home model label args...
  local f=$1 home=$2 m=$3 label=$4; shift 4
  DOPPLER_HOME=$home timeout 150 $B recipes/bench/decode.lua --model $m --label "$label" "$@" >>"$OUT/$f" 2>>"$OUT/err.txt"
}
S="--prompt-tokens 32 --tokens 128 --runs 2"
run 21c_merge.jsonl $PWD $G warm $S
for round in 1 2; do
  for tree in A B; do
    home=$PWD; [ $tree = A ] && home=$PWD/.abA
    run 21c_merge.jsonl $home $G "$tree-default" $S
    run 21c_merge.jsonl $home $G "$tree-h1-uk1" $S --hint attention_heads=1 --hint attention_unroll=1
    run 21c_merge.jsonl $home $L "$tree-h1-uk1-wg64" $S --hint attention_heads=1 --hint attention_unroll=1 --hint attention_wg=64
  done
done
LONG="--prompt-tokens 2048 --tokens 128 --runs 2 --hint context=4096"
while read -r label hints; do
  hs=""; for kv in $hints; do hs="$hs --hint $kv"; done
  run 21c_long.jsonl $PWD $G "$label" $LONG $hs
done <<'LIST'
default
h1-uk2 attention_heads=1
h1-uk1 attention_heads=1 attention_unroll=1
h1-uk1-wg512 attention_heads=1 attention_unroll=1 attention_wg=512
LIST
while read -r label hints; do
  hs=""; for kv in $hints; do hs="$hs --hint $kv"; done
  run 21c_long.jsonl $PWD $L "$label" $LONG $hs
done <<'LIST'
default
h1-uk2 attention_heads=1
h1-uk1 attention_heads=1 attention_unroll=1
h1-uk1-wg64 attention_heads=1 attention_unroll=1 attention_wg=64
h1-uk2-wg64 attention_heads=1 attention_wg=64
LIST
python3 - "$OUT/21c_merge.jsonl" "$OUT/21c_long.jsonl" <<'PY'
import json, sys
for f in sys.argv[1:]:
    runs = {}
    for l in open(f):
        if l.startswith("{"):
            d = json.loads(l)
            k = (d["model"].split("/")[-1], d["label"])
            r = runs.setdefault(k, {"tok": [], "attn": [], "gpu": []})
            r["tok"].append(d["decode_tok_s"] or 0)
            if d.get("gpu_ms_per_kernel"):
                r["attn"].append(d["gpu_ms_per_kernel"].get("attention_decode"))
                r["gpu"].append(d.get("gpu_ms_per_token"))
    print(f.split("/")[-1])
    for (m, lab), r in runs.items():
        print("%-5s %-20s decode %s  attention_decode %s ms/tok  gpu %s ms/tok" % (m[:12], lab, " / ".join("%.1f" % t for t in r["tok"]),
              " / ".join("%.3f" % a for a in r["attn"] if a), " / ".join("%.3f" % a for a in r["gpu"] if a)))
PY
tail -5 "$OUT/err.txt" 2>/dev/null
