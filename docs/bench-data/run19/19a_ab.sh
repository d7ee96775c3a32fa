#!/usr/bin/env bash
# 19a: gemv_norm (the o / down GEMV's last workgroup runs the norm it feeds) against HEAD (f69cfb1), defaults.
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
J=$OUT/19a_gemv_norm.jsonl
run() { local lab=$1 home=$2 m=$3 prof=$4; shift 4
  local hs=""; for h in "$@"; do case $h in --*|[0-9]*) hs="$hs $h";; *) hs="$hs --hint $h";; esac; done
  local p="--no-profile"; [ $prof = 1 ] && p="--profile-tokens 16"
  DOPPLER_HOME=$home DOPPLER_PROFILE_SHAPES=1 timeout 120 $B recipes/bench/decode.lua --model $m --prompt-tokens 32 --tokens 128 $hs --runs 2 $p --label $lab >> $J 2>>$OUT/err.txt; }
for m in $G $LQ; do timeout 120 $B scratch/gn_big.lua $m 2>&1 | tail -3; done
run warm $PWD $Q 0; run warmh $PWD/scratch/head $Q 0
for round in 1 2; do for m in $Q $G $LQ; do n=$(basename $m .gguf)
  run $n-head$round $PWD/scratch/head $m 0
  run $n-new$round $PWD $m 0
  run $n-off$round $PWD $m 0 fusion=-gemv_norm,-gemv_add_norm
done; done
for m in $Q $LQ; do n=$(basename $m .gguf)
  run prof-$n-head $PWD/scratch/head $m 1
  run prof-$n-new $PWD $m 1
done
python3 - $J <<'PY'
import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d=json.loads(l); k=d.get("gpu_ms_per_kernel") or {}
        if d["label"].startswith("prof") and d["run"]==2: continue
        s=" ".join("%s=%.3f"%(a,b) for a,b in sorted(k.items()) if b>0.02) if d["label"].startswith("prof") else ""
        print(d["label"], "run", d["run"], "decode %.1f"%(d["decode_tok_s"] or 0), "p50", d.get("p50_ms"), "gpu/tok", d.get("gpu_ms_per_token"), s)
PY
tail -2 $OUT/err.txt
for t in fuse_attn gemma3_fixtures families_fixtures gpu_loop; do
  timeout 240 $B tests/lua/test_$t.lua >"$OUT/19a_h100_t_$t.txt" 2>&1; echo "test_$t: $(tail -1 "$OUT/19a_h100_t_$t.txt")"
done
timeout 100 $B scratch/gn.lua 2>&1 | tail -12
