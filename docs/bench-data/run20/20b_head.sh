#!/usr/bin/env bash
# 20b (session 13): the LM head of a Q4_K_M model in blocks (q_matmul_head auto) against its f16 copy
# (q_matmul_head=dequant_f16, the behaviour before), the layers on their f16 copies in both; one binary, one tree.
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
J=$OUT/20b_head.jsonl
run() { local lab=$1 m=$2 prof=$3; shift 3
  local hs=""; for h in "$@"; do hs="$hs --hint $h"; done
  local p="--no-profile"; [ $prof = 1 ] && p="--profile-tokens 16"
  timeout 120 $B recipes/bench/decode.lua --model $m --prompt-tokens 32 --tokens 128 $hs --runs 2 $p --label $lab >> $J 2>>$OUT/err.txt; }
run warm $Q 0
for round in 1 2; do
  run gemma-copyhead$round $Q 0 q_matmul_head=dequant_f16
  run gemma-auto$round $Q 0
  run llama-copyhead$round $LQ 0
  run llama-fusedhead$round $LQ 0 q_matmul_head=fused
done
run prof-gemma-copyhead $Q 1 q_matmul_head=dequant_f16
run prof-gemma-auto $Q 1
run prof-llama-copyhead $LQ 1
run prof-llama-fusedhead $LQ 1 q_matmul_head=fused
python3 - $J <<'PY'
import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d=json.loads(l); k=d.get("gpu_ms_per_kernel") or {}
        if d["label"].startswith("prof") and d["run"]==2: continue
        s=" ".join("%s=%.3f"%(a,b) for a,b in sorted(k.items()) if b>0.02) if d["label"].startswith("prof") else ""
        print(d["label"], "run", d["run"], "decode %.1f"%(d["decode_tok_s"] or 0), "p50", d.get("p50_ms"), "peak_vram", d.get("peak_vram_bytes"), "gpu/tok", d.get("gpu_ms_per_token"), s)
PY
tail -2 $OUT/err.txt
for t in gguf_fixtures lm_head_fusion gemma3_fixtures gpu_loop; do
  timeout 300 $B tests/lua/test_$t.lua >"$OUT/20b_h100_t_$t.txt" 2>&1; echo "test_$t: $(tail -1 "$OUT/20b_h100_t_$t.txt")"
done
grep -E "copies\+head|Q8_0 " $OUT/20b_h100_t_gguf_fixtures.txt | tail -4
