#!/usr/bin/env bash
# Run 31e (session 24), nvidia-h100-x1: 31d's tuner picked gemv_rows=1 (by wall clock) on both Q4_K_M models.
# Decode with gemv_rows=1 against the default (2) on the four models, with the LM head's workgroups at their
# 31c best, two rounds; prefill and TTFT of Gemma 3 1B F16 with it (the float GEMVs' rows also reach those
# passes' GEMV kernels where they run); profiles.
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done 2>/dev/null; ldconfig
I=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $I ] && export VK_DRIVER_FILES=$I
export DOPPLER_CACHE_DIR=/tmp/dpc DOPPLER_BIN=$PWD/build-h100/doppler DOPPLER_FIXTURES=$PWD/tests/fixtures
B=$PWD/build-h100/doppler
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
G=/tmp/g1b L=/tmp/l1b
[ -d $G ] || timeout 200 $B synth --config models/configs/gemma-3-1b-it.config.json \
  --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f /tmp/g1b-q4_k_m.gguf ] || $B convert $G --quant q4_k_m --out /tmp/g1b-q4_k_m.gguf --no-manifest --quiet
[ -d $L ] || timeout 200 $B synth --config models/configs/llama-3.2-1b-instruct.config.json \
  --tokenizer tests/fixtures/tokenizers/llama3.tokenizer.json.gz --out $L --dtype f16 >/dev/null 2>&1
[ -f /tmp/l1b-q4_k_m.gguf ] || $B convert $L --quant q4_k_m --out /tmp/l1b-q4_k_m.gguf --no-manifest --quiet
echo "models ready $(date +%T)"
dec() {  # label model args...
  local label=$1 m=$2; shift 2
  timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 --tokens 128 "$@" \
    >>"$OUT/31e_decode.jsonl" 2>>"$OUT/31e_err.txt"
}
GQ=/tmp/g1b-q4_k_m.gguf LQ=/tmp/l1b-q4_k_m.gguf
for round in 1 2; do
  for m in $GQ $LQ $G $L; do
    dec default $m --runs 2 --no-profile
    dec rows1 $m --runs 2 --no-profile --hint gemv_rows=1
  done
  dec rows1-head924 $GQ --runs 2 --no-profile --hint gemv_rows=1 --hint lm_head_groups=924
  dec rows1-head960 $GQ --runs 2 --no-profile --hint gemv_rows=1 --hint lm_head_groups=960
  dec rows1-head512 $LQ --runs 2 --no-profile --hint gemv_rows=1 --hint lm_head_groups=512
  dec rows1-pfoff $GQ --runs 2 --no-profile --hint gemv_rows=1 --hint side_prefetch=off
  dec pfoff $GQ --runs 2 --no-profile --hint side_prefetch=off
  echo "round $round done $(date +%T)"
done
for m in $GQ $LQ; do
  dec default-profile $m --runs 1 --profile-tokens 64
  dec rows1-profile $m --runs 1 --profile-tokens 64 --hint gemv_rows=1
done
for h in "" "--hint gemv_rows=1"; do
  timeout 100 $B recipes/bench/prefill.lua --model $G --label "pf$h" $h >>"$OUT/31e_prefill.jsonl" 2>>"$OUT/31e_err.txt"
  timeout 100 $B recipes/bench/ttft.lua --model $G --label "ttft$h" $h >>"$OUT/31e_prefill.jsonl" 2>>"$OUT/31e_err.txt"
done
python3 - "$OUT/31e_decode.jsonl" "$OUT/31e_prefill.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        if d.get("p50_ms"): p50[key].append(d["p50_ms"])
        k = d.get("gpu_ms_per_kernel") or {}
        if k:
            print(key, "gpu ms/token %.4f" % d["gpu_ms_per_token"])
            for n, v in sorted(k.items(), key=lambda x: -x[1]): print("    %-30s %.4f" % (n, v))
for key, v in p50.items():
    print("%-16s %-16s p50 %s" % (key[0], key[1], " ".join("%.4f" % x for x in v)))
for l in open(sys.argv[2]):
    if l.startswith("{"):
        d = json.loads(l)
        print(d["label"], d["mode"], "prefill %.0f ttft %.2f" % (d["prefill_tok_s"] or 0, d["ttft_ms"] or 0))
PY
tail -3 "$OUT/31e_err.txt"
echo "done $(date +%T), $(( $(date +%s) - T0 )) s"
