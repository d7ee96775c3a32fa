#!/usr/bin/env bash
# Run 21d (session 14): the new attention_decode auto (one q head per workgroup, 8 clusters, 1 key per round)
# against the old auto (the tree in .abA: every q head of a kv head in one workgroup, WG 256, 2 keys per round),
# one binary, DOPPLER_HOME per tree, two rounds, at the issue-7 shape; then STAGES=issue7 of h100-bench.sh on
# the new tree. Run on the nvidia-h100-x1 from the repository root with build-h100/, .gl/ and .abA/ carried.
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
run() {  # home model label
  DOPPLER_HOME=$1 timeout 150 $B recipes/bench/decode.lua --model $2 --label "$3" --prompt-tokens 32 --tokens 128 \
    --runs 2 >>"$OUT/21d_ab.jsonl" 2>>"$OUT/err.txt"
}
run $PWD /tmp/g1b-q4_k_m.gguf warm
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf $G /tmp/l1b-q4_k_m.gguf $L; do
    run $PWD/.abA $m old
    run $PWD $m new
  done
done
python3 - "$OUT/21d_ab.jsonl" <<'PY'
import json, sys
runs = {}
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = (d["model"].split("/")[-1], d["label"])
        r = runs.setdefault(k, {"tok": [], "attn": [], "gpu": []})
        r["tok"].append(d["decode_tok_s"] or 0)
        if d.get("gpu_ms_per_kernel"):
            r["attn"].append(d["gpu_ms_per_kernel"].get("attention_decode"))
            r["gpu"].append(d.get("gpu_ms_per_token"))
for (m, lab), r in runs.items():
    print("%-16s %-5s decode %s  attention_decode %s  gpu %s ms/tok" % (m[:16], lab, " / ".join("%.1f" % t for t in r["tok"]),
          " / ".join("%.3f" % a for a in r["attn"] if a), " / ".join("%.3f" % a for a in r["gpu"] if a)))
PY
STAGES=issue7 bash scripts/device/h100-bench.sh
tail -5 "$OUT/err.txt" 2>/dev/null
