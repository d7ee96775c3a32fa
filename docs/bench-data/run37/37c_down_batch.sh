#!/usr/bin/env bash
# Run 37c (session 30), nvidia-h100-x1: the quantised fused MLP's down phase with DB outputs' columns of D requested
# together (gemv_q.comp spec constant DB, hint glu_down_batch; before: one output at a time, a memory round trip
# each: 5 per thread for Gemma 3 1B, 8 for Llama 3.2 1B) against DB = 1, three rounds of 2 runs, both Q4_K_M models;
# profiles with register counts.
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
    --tokens 128 "$@" >>"$OUT/37c_decode.jsonl" 2>>"$OUT/37c_err.txt"
}
for round in 1 2 3; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    for b in 1 2 4 8; do
      dec "db$b" $m --runs 2 --no-profile --hint glu_down_batch=$b
    done
    dec "db4-r64" $m --runs 2 --no-profile --hint glu_down_batch=4 --hint glu_down_rows=64 --hint glu_down_wg=512
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
  for b in 1 4 8; do DOPPLER_KERNEL_STATS=1 dec "db$b-profile" $m --runs 1 --profile-tokens 16 --hint glu_down_batch=$b; done
done
python3 - "$OUT/37c_decode.jsonl" <<'PY'
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
grep -E 'kernel stats: gemv_q .*DP_DOWN' "$OUT/37c_err.txt" | sed 's/Binary Size=[0-9]*, //; s/Local Memory Size=[0-9]*, //' | sort -u | cut -c1-300
tail -3 "$OUT/37c_err.txt"
echo "done $(( $(date +%s) - T0 )) s"
