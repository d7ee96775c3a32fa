#!/usr/bin/env bash
# Run 37e (session 30), nvidia-h100-x1: fusion glu_down_norm (the add_rmsnorm after Llama's fused MLP run by the
# MLP's last workgroup, gemv_q.comp's DP_DOWN_NORM) against --hint fusion=-glu_down_norm, three rounds of 2 runs,
# Llama 3.2 1B Q4_K_M (and Gemma 3 1B Q4_K_M, which has no such add_rmsnorm: unchanged); profiles; the greedy ids
# of both on the same prompt must agree.
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(( $(date +%s) - T0 )) s"
dec() {  # label model args...
  local label=$1 m=$2; shift 2
  timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 "$@" >>"$OUT/37e_decode.jsonl" 2>>"$OUT/37e_err.txt"
}
for round in 1 2 3; do
  for m in /tmp/l1b-q4_k_m.gguf /tmp/g1b-q4_k_m.gguf; do
    dec on $m --runs 2 --no-profile
    dec off $m --runs 2 --no-profile --hint fusion=-glu_down_norm
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
for m in /tmp/l1b-q4_k_m.gguf /tmp/g1b-q4_k_m.gguf; do
  DOPPLER_KERNEL_STATS=1 dec on-profile $m --runs 1 --profile-tokens 16
  dec off-profile $m --runs 1 --profile-tokens 16 --hint fusion=-glu_down_norm
done
for m in /tmp/l1b-q4_k_m.gguf /tmp/g1b-q4_k_m.gguf; do
  a=$($B run --model $m --ids 1,400,3000,77,9000,12,5 --max-tokens 64 --print-ids --quiet 2>>"$OUT/37e_err.txt")
  b=$($B run --model $m --ids 1,400,3000,77,9000,12,5 --max-tokens 64 --print-ids --quiet --hint fusion=-glu_down_norm 2>>"$OUT/37e_err.txt")
  echo "$m ids on:  $a" | tee -a "$OUT/37e_ids.txt"
  echo "$m ids off: $b" | tee -a "$OUT/37e_ids.txt"
  [ "$a" = "$b" ] && echo "$m: same ids" | tee -a "$OUT/37e_ids.txt" || echo "$m: IDS DIFFER" | tee -a "$OUT/37e_ids.txt"
done
python3 - "$OUT/37e_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list); tok = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        p50[key].append(d["p50_ms"]); tok[key].append(d["decode_tok_s"])
        if d["gpu_ms_per_kernel"]:
            print(key, {k: round(v, 4) for k, v in sorted(d["gpu_ms_per_kernel"].items(), key=lambda x: -x[1])[:8]})
for key in p50:
    print("%-16s %-18s p50 %s  tok/s %s" % (key[0], key[1], " ".join("%.4f" % x for x in p50[key]), " ".join("%.1f" % x for x in tok[key])))
PY
grep -E 'kernel stats: gemv_q .*DP_DOWN' "$OUT/37e_err.txt" | sed 's/Binary Size=[0-9]*, //; s/Local Memory Size=[0-9]*, //' | sort -u | cut -c1-300
tail -3 "$OUT/37e_err.txt"
echo "done $(( $(date +%s) - T0 )) s"
