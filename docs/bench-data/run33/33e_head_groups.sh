#!/usr/bin/env bash
# Run 33e (session 26), nvidia-h100-x1: the fused LM head's workgroups (hint lm_head_groups; default 1024 on a
# GPU) on the four models, two rounds, decode p50. Why: session 24 (31c, 31f) found Gemma's Q8_0 head best at
# 924-960 and Llama's Q6_K head at 256-768, each measured alone; this looks for one rule for both.
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
dec() {  # groups model
  timeout 60 $B recipes/bench/decode.lua --model $2 --label "g$1" --prompt-tokens 32 --tokens 128 --runs 2 \
    --no-profile --hint lm_head_groups=$1 >>"$OUT/33e_decode.jsonl" 2>>"$OUT/33e_err.txt"
}
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do for g in 1024 256 512 768 896 960; do dec $g $m; done; done
  for m in $G $L; do for g in 1024 512 768 960; do dec $g $m; done; done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf $G $L; do
  timeout 60 $B recipes/bench/decode.lua --model $m --label profile --prompt-tokens 32 --tokens 128 --runs 1 \
    --profile-tokens 16 >>"$OUT/33e_decode.jsonl" 2>>"$OUT/33e_err.txt"
done
python3 - "$OUT/33e_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        p50[key].append(d["p50_ms"])
        if d["gpu_ms_per_kernel"]:
            print(key, {k: round(v, 4) for k, v in sorted(d["gpu_ms_per_kernel"].items(), key=lambda x: -x[1])[:6]})
for key in sorted(p50):
    v = sorted(p50[key])
    print("%-16s %-8s p50 %s  (median of the last 3: %.4f)" % (key[0], key[1], " ".join("%.4f" % x for x in p50[key]), v[len(v)//2]))
PY
tail -3 "$OUT/33e_err.txt"
echo "done $(( $(date +%s) - T0 )) s"
