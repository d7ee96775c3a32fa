#!/usr/bin/env bash
# Run 22d (session 15): 22a's registers put Llama 3.2 1B's q/k/v (gemv_multi on f16 copies, 3072 x 2048, 2 rows:
# 1,536 workgroups of 128) over the 1,320 that 132 SMs hold at 45 registers: two waves. gemv_rows=4 (768
# workgroups) fits one. All float GEMVs take the hint; DOPPLER_PROFILE_SHAPES=1 splits them by shape. Two rounds.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1 &
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1 &
wait
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet &
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet &
wait
run() {  # model label args...
  local m=$1 label=$2; shift 2
  DOPPLER_PROFILE_SHAPES=1 timeout 150 $B recipes/bench/decode.lua --model $m --label "$label" \
    --prompt-tokens 32 --tokens 128 --runs 2 "$@" >>"$OUT/22d_gemv_rows.jsonl" 2>>"$OUT/err.txt"
}
for round in 1 2; do
  for m in /tmp/l1b-q4_k_m.gguf /tmp/l1b /tmp/g1b-q4_k_m.gguf; do
    run $m default
    run $m rows4 --hint gemv_rows=4
  done
done
python3 - "$OUT/22d_gemv_rows.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = d.get("gpu_ms_per_kernel") or {}
        g = {a: b for a, b in k.items() if a.startswith("gemv@") or a.startswith("gemv_multi@")}
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f" % (d["decode_tok_s"] or 0),
              " ".join("%s %.3f" % (a, b) for a, b in sorted(g.items())))
PY
tail -3 "$OUT/err.txt" 2>/dev/null
