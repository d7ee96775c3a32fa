#!/usr/bin/env bash
# Run 21i (session 14): a Q6_K LM head stored flat kept in blocks (q_matmul_head auto) against its f16 copy (the
# tree before, in .abA), one binary, two rounds; then STAGES=issue7 of h100-bench.sh
# on the new tree, then H100 tests of the head paths.
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
run() {  # home model label args...
  local home=$1 m=$2 label=$3; shift 3
  DOPPLER_HOME=$home timeout 150 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 --runs 2 "$@" >>"$OUT/21i_head.jsonl" 2>>"$OUT/err.txt"
}
run $PWD /tmp/g1b-q4_k_m.gguf warm
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    run $PWD/.abA $m old
    run $PWD $m new
  done
done
python3 - "$OUT/21i_head.jsonl" <<'PY'
import json, sys
runs = {}
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = (d["model"].split("/")[-1], d["label"])
        r = runs.setdefault(k, {"tok": [], "k": None, "load": []})
        r["tok"].append(d["decode_tok_s"] or 0); r["load"].append(d.get("load_s") or 0)
        if d.get("gpu_ms_per_kernel"): r["k"] = d["gpu_ms_per_kernel"]
for (m, lab), r in runs.items():
    k = r["k"] or {}
    print("%-16s %-5s decode %s load_s %s | %s" % (m[:16], lab, " / ".join("%.1f" % t for t in r["tok"]),
          " / ".join("%.2f" % t for t in sorted(set(r["load"]))), " ".join("%s %.3f" % (a, b) for a, b in sorted(k.items(), key=lambda x: -x[1])[:5])))
PY
STAGES=issue7 bash scripts/device/h100-bench.sh
for t in lm_head_fusion gguf_fixtures gemv_q8 families_fixtures gpu_loop; do
  timeout 300 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/h100_tests.txt"
done
tail -3 "$OUT/err.txt" 2>/dev/null
