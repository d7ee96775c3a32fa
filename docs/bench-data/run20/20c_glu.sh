#!/usr/bin/env bash
# 20c (session 13): gate+up of a Q4_K_M model in blocks at decode (q_matmul_glu auto) against its f16 copies
# (q_matmul_glu=dequant_f16: the tree of 20b); head auto in both; one binary, one tree.
set -u
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export DOPPLER_CACHE_DIR=/tmp/dpc B=$PWD/build-h100/doppler DOPPLER_BIN=$PWD/build-h100/doppler
[ -f /usr/lib/x86_64-linux-gnu/libvulkan.so.1 ] || { for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; }
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
G=/tmp/g1b L=/tmp/l1b Q=/tmp/g1b-q4_k_m.gguf LQ=/tmp/l1b-q4_k_m.gguf
[ -d $G ] || $B synth --config models/configs/gemma-3-1b-it.config.json --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f $Q ] || $B convert $G --quant q4_k_m --out $Q --no-manifest --quiet
[ -d $L ] || $B synth --config models/configs/llama-3.2-1b-instruct.config.json --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f $LQ ] || $B convert $L --quant q4_k_m --out $LQ --no-manifest --quiet
J=$OUT/20c_glu.jsonl
run() { local lab=$1 m=$2 prof=$3; shift 3
  local hs=""; for h in "$@"; do hs="$hs --hint $h"; done
  local p="--no-profile"; [ $prof = 1 ] && p="--profile-tokens 16"
  timeout 120 $B recipes/bench/decode.lua --model $m --prompt-tokens 32 --tokens 128 $hs --runs 2 $p --label $lab >> $J 2>>$OUT/err.txt; }
run warm $Q 0
for round in 1 2; do
  run gemma-copyglu$round $Q 0 q_matmul_glu=dequant_f16
  run gemma-auto$round $Q 0
  run llama-copyglu$round $LQ 0 q_matmul_glu=dequant_f16
  run llama-auto$round $LQ 0
done
run prof-gemma-copyglu $Q 1 q_matmul_glu=dequant_f16
run prof-gemma-auto $Q 1
run prof-llama-copyglu $LQ 1 q_matmul_glu=dequant_f16
run prof-llama-auto $LQ 1
for m in $Q $LQ; do for lab in copyglu auto; do h=""; [ $lab = copyglu ] && h="--hint q_matmul_glu=dequant_f16"
  timeout 100 $B recipes/bench/prefill.lua --model $m $h --no-profile --label pre-$lab >> $J 2>>$OUT/err.txt
  timeout 100 $B recipes/bench/ttft.lua --model $m $h --no-profile --label ttft-$lab >> $J 2>>$OUT/err.txt
done; done
python3 - $J <<'PY'
import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d=json.loads(l); k=d.get("gpu_ms_per_kernel") or {}
        if d["label"].startswith("prof") and d["run"]==2: continue
        s=" ".join("%s=%.3f"%(a,b) for a,b in sorted(k.items()) if b>0.02) if d["label"].startswith("prof") else ""
        print(d["label"], "run", d["run"], "decode %.1f prefill %.0f ttft %.2f"%(d["decode_tok_s"] or 0, d["prefill_tok_s"], d["ttft_ms"]), "p50", d.get("p50_ms"), "peak_vram", d.get("peak_vram_bytes"), "gpu/tok", d.get("gpu_ms_per_token"), s)
PY
tail -2 $OUT/err.txt
for t in gguf_fixtures families_fixtures gpu_loop gemv_q8; do
  timeout 300 $B tests/lua/test_$t.lua >"$OUT/20c_h100_t_$t.txt" 2>&1; echo "test_$t: $(tail -1 "$OUT/20c_h100_t_$t.txt")"
done
grep -E "Q8_0 " $OUT/20c_h100_t_gguf_fixtures.txt | tail -4
