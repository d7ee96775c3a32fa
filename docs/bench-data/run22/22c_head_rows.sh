#!/usr/bin/env bash
# Run 22c (session 15): the quantised LM head at 128 invocations and 8 rows (lower.lua, gemv_params `head`)
# against the tree before (in .abA: the Q_MAX_ROUNDS rule, 4 rows for Llama 3.2 1B's 128256 x 2048 head); one
# binary, DOPPLER_HOME per tree, two rounds; then H100 tests of the head paths, the kernel-stats line of
# test_cli, and STAGES=issue7 of h100-bench.sh.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# the models (the first call found a fresh machine without them: its A/B lines failed; AB_ONLY=1 reran the A/B)
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
run() {  # home model label args...
  local home=$1 m=$2 label=$3; shift 3
  DOPPLER_HOME=$home timeout 150 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 --runs 2 "$@" >>"$OUT/22c_head.jsonl" 2>>"$OUT/err.txt"
}
for round in 1 2; do
  for m in /tmp/l1b-q4_k_m.gguf /tmp/g1b-q4_k_m.gguf; do
    run $PWD/.abA $m old
    run $PWD $m new
  done
done
python3 - "$OUT/22c_head.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = d.get("gpu_ms_per_kernel") or {}
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f p50 %.3f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0),
              "head %s" % k.get("lm_head_q"), "peak %.2f GB" % ((d.get("peak_vram_bytes") or 0) / 1e9))
PY
[ "${AB_ONLY:-0}" = 1 ] && exit 0
for t in lm_head_fusion gemv_q8 gguf_fixtures gpu_loop; do
  timeout 300 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/22c_h100_tests.txt"
done
DOPPLER_KERNEL_STATS=1 $B recipes/gemma3.lua --model tests/fixtures/models/gemma3-tiny --ids 1,2 --max-tokens 2 \
  --quiet 2>&1 | grep -c "doppler: kernel stats: attention_decode" | sed 's/^/kernel-stats attention_decode lines: /'
STAGES=issue7 bash scripts/device/h100-bench.sh
tail -3 "$OUT/err.txt" 2>/dev/null
