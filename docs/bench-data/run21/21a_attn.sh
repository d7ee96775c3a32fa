#!/usr/bin/env bash
# Run 21a (session 14): attention_decode with a kv head's q heads split over workgroups (hint attention_heads),
# swept against workgroup size, keys per round and chunk size; H100 tests of the change first.
# Run on the device from the repository root with build-h100/ and .gl/ carried; results in $OUT.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler
B=$PWD/build-h100/doppler G=/tmp/g1b L=/tmp/l1b
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1 &
timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1 &
for t in ${TESTS:-fuse_attn gpu_loop}; do
  timeout 300 $B tests/lua/test_$t.lua >"$OUT/h100_t_$t.txt" 2>&1; echo "test_$t: $(tail -1 "$OUT/h100_t_$t.txt")"
done
wait
D="recipes/bench/decode.lua --prompt-tokens 32 --tokens 128 --runs 2"
run() {  # model label hints...
  local m=$1 label=$2; shift 2
  local hs=""; for kv in "$@"; do hs="$hs --hint $kv"; done
  timeout 120 $B $D --model $m $hs --label "$label" >>"$OUT/21a_attn.jsonl" 2>>"$OUT/err.txt"
}
run $G warm
while read -r label hints; do run $G "$label" $hints; done <<'LIST'
default
h1 attention_heads=1
h2 attention_heads=2
h1-wg128 attention_heads=1 attention_wg=128
h1-uk1 attention_heads=1 attention_unroll=1
h1-wg512 attention_heads=1 attention_wg=512
h1-wg1024 attention_heads=1 attention_wg=1024
h1-wg512-uk4 attention_heads=1 attention_wg=512 attention_unroll=4
h1-wg1024-uk4 attention_heads=1 attention_wg=1024 attention_unroll=4
h1-wg512-uk8 attention_heads=1 attention_wg=512 attention_unroll=8
h1-wg1024-one attention_heads=1 attention_wg=1024 attention_min_chunk=256
h1-wg512-uk4-one attention_heads=1 attention_wg=512 attention_unroll=4 attention_min_chunk=256
h2-wg512 attention_heads=2 attention_wg=512
default-again
LIST
while read -r label hints; do run $L "$label" $hints; done <<'LIST'
default
h1 attention_heads=1
h2 attention_heads=2
h1-wg512 attention_heads=1 attention_wg=512
h1-wg1024 attention_heads=1 attention_wg=1024
h1-wg1024-uk1 attention_heads=1 attention_wg=1024 attention_unroll=1
h1-wg512-uk4 attention_heads=1 attention_wg=512 attention_unroll=4
h1-wg128 attention_heads=1 attention_wg=128
default-again
LIST
python3 - "$OUT/21a_attn.jsonl" <<'PY'
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
    print("%-5s %-20s decode %s  attention_decode %s ms/tok  gpu %s ms/tok" % (m, lab, " / ".join("%.1f" % t for t in r["tok"]),
          "%.3f" % r["attn"] if r["attn"] else "-", "%.3f" % r["gpu"] if r["gpu"] else "-"))
PY
tail -5 "$OUT/err.txt" 2>/dev/null
