#!/usr/bin/env bash
# Run 28a (session 21), nvidia-h100-x1: the persistent-kernel probe (recipes/bench/persistent.lua): a decode
# token's GEMV chain as one dispatch per step against one persistent dispatch with grid barriers, same kernel,
# one call; then doppler's own decode at the issue-7 shape on the same machine, for scale.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_HOME=$PWD
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
J=$OUT/28a_probe.jsonl
(nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv 2>&1 || true) | head -3
p() { echo "# $*" >>"$OUT/err.txt"; timeout 120 $B recipes/bench/persistent.lua "$@" >>"$J" 2>>"$OUT/err.txt"; }
for s in llama gemma; do
  for w in f16 q4; do
    p --shape $s --weights $w --modes dispatch,persistent,sync --label base
  done
done
echo "base done $(date +%T)"
for w in q4 f16; do
  for un in 1 4; do p --shape llama --weights $w --un $un --label un$un; done
  p --shape llama --weights $w --groups 66 --label g66
  p --shape llama --weights $w --groups 264 --wg 512 --label g264wg512
  p --shape llama --weights $w --modes dispatch --wg 256 --dispatch-groups 528 --label d528wg256
  p --shape llama --weights $w --modes dispatch --wg 256 --dispatch-groups 1056 --label d1056wg256
  p --shape llama --weights $w --no-head --label nohead
done
p --shape llama --weights q4 --tokens 128 --label t128
echo "sweep done $(date +%T)"
python3 - "$J" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"): continue
    d = json.loads(l)
    print("%-11s %-6s %-4s %-16s G=%-4s wg=%-4s un=%s  %.4f ms/tok  %7.1f tok/s  %6.1f GB/s  %.2f us/step" % (
        d.get("label"), d["shape"], d["weights"], d["mode"], d["groups"], d["wg"], d["un"], d["ms_per_token"],
        d["tok_s"], d["gb_s"], d["us_per_step"]))
PY
G=/tmp/g1b L=/tmp/l1b
timeout 150 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
timeout 100 $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(date +%T)"
for m in /tmp/l1b-q4_k_m.gguf $L; do
  timeout 60 $B recipes/bench/decode.lua --model $m --label engine --prompt-tokens 32 --tokens 128 --runs 2 \
    --no-profile >>"$OUT/28a_decode.jsonl" 2>>"$OUT/err.txt"
  timeout 60 $B recipes/bench/decode.lua --model $m --label engine-profile --prompt-tokens 32 --tokens 128 --runs 1 \
    --profile-tokens 16 >>"$OUT/28a_decode.jsonl" 2>>"$OUT/err.txt"
done
python3 - "$OUT/28a_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l); k = d.get("gpu_ms_per_kernel") or {}
        print(d["label"], d["model"], d["decode_tok_s"], " ".join("%s=%.3f" % x for x in sorted(k.items(), key=lambda x: -x[1])[:8]))
PY
tail -5 "$OUT/err.txt"
echo "all done $(date +%T)"
