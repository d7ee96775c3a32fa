#!/usr/bin/env bash
# Run 31g (session 24), nvidia-h100-x1: 31e found gemv_rows=1 faster for the Q4_K_M models and slower for the
# F16 ones; the hint also sets the float LM head's rows (F16 models only). Candidate defaults on a GPU:
# .abV1 = one row per workgroup for gemv.comp's linears (o, down), the head keeps 2; .abV2 = V1 and one row for
# gemv_multi's q/k/v (not gate+up). Against HEAD on the four models, two rounds; the fixture tests with V2.
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
dec() {  # label home model args...
  local label=$1 home=$2 m=$3; shift 3
  DOPPLER_HOME=$home timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 "$@" >>"$OUT/31g_decode.jsonl" 2>>"$OUT/31g_err.txt"
}
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf $G $L; do
    dec head $PWD $m --runs 2 --no-profile
    dec V1 $PWD/.abV1 $m --runs 2 --no-profile
    dec V2 $PWD/.abV2 $m --runs 2 --no-profile
  done
  echo "round $round done $(date +%T)"
done
for m in /tmp/g1b-q4_k_m.gguf $L; do
  dec head-profile $PWD $m --runs 1 --profile-tokens 64
  dec V2-profile $PWD/.abV2 $m --runs 1 --profile-tokens 64
done
python3 - "$OUT/31g_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list); tok = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        p50[key].append(d["p50_ms"]); tok[key].append(d["decode_tok_s"])
        k = d.get("gpu_ms_per_kernel") or {}
        if k:
            print(key, "gpu ms/token %.4f" % d["gpu_ms_per_token"])
            for n, v in sorted(k.items(), key=lambda x: -x[1]): print("    %-30s %.4f" % (n, v))
for key in p50:
    print("%-16s %-14s p50 %s  tok/s %s" % (key[0], key[1], " ".join("%.4f" % x for x in p50[key]),
          " ".join("%.1f" % x for x in tok[key])))
PY
for t in gemma3_fixtures families_fixtures gpu_loop fuse_attn kernels; do
  DOPPLER_HOME=$PWD/.abV2 timeout 200 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "V2 test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== V2 test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/31g_h100_tests.txt"
done
tail -3 "$OUT/31g_err.txt"
echo "done $(date +%T), $(( $(date +%s) - T0 )) s"
