#!/usr/bin/env bash
# Run 37a (session 30), nvidia-h100-x1: the quantised fused MLP (gemv_q.comp DP_DOWN) with more lanes per row of h
# than session 27's 8 (34e measured 2, 4 and 8 only: 8 best, more better), by hints glu_down_rows x glu_down_wg,
# and with gemv_q_unroll=2; Gemma 3 1B and Llama 3.2 1B Q4_K_M (doppler convert --quant q4_k_m of the synthetic
# F16 models), two rounds of 2 runs; profiles of the default and two candidates; register counts.
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
    --tokens 128 "$@" >>"$OUT/37a_decode.jsonl" 2>>"$OUT/37a_err.txt"
}
geo() { echo "--hint glu_down_rows=$1 --hint glu_down_wg=$2"; }
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    dec default $m --runs 2 --no-profile
    for rw in "32 512" "32 1024" "16 256" "16 512" "64 1024" "64 512"; do
      set -- $rw
      dec "r$1-wg$2" $m --runs 2 --no-profile $(geo $1 $2)
    done
    dec "r32-wg256-un2" $m --runs 2 --no-profile $(geo 32 256) --hint gemv_q_unroll=2
    dec "r32-wg512-un2" $m --runs 2 --no-profile $(geo 32 512) --hint gemv_q_unroll=2
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
  DOPPLER_KERNEL_STATS=1 dec default-profile $m --runs 1 --profile-tokens 16
  DOPPLER_KERNEL_STATS=1 dec r32-wg512-profile $m --runs 1 --profile-tokens 16 $(geo 32 512)
  DOPPLER_KERNEL_STATS=1 dec r32-wg1024-profile $m --runs 1 --profile-tokens 16 $(geo 32 1024)
done
python3 - "$OUT/37a_decode.jsonl" <<'PY'
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
grep -i 'gemv_q' "$OUT/37a_err.txt" | sort | uniq | head -20
tail -3 "$OUT/37a_err.txt"
echo "done $(( $(date +%s) - T0 )) s"
