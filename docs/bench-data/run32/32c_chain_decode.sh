#!/usr/bin/env bash
# Run 32c (session 25), nvidia-h100-x1: the chained decode after 32b (0.68x, and test_gguf_fixtures failed):
# counters in 32 stripes (a workgroup bumps its own; 32b had a thousand workgroups bump one word), weights read
# without `coherent`, and every chained dispatch waits for its whole epoch (32b let one without a hazard of its
# own skip the wait, and a later one then missed an earlier write). chain=off, chain (this tree) and `.abC`
# (this tree with no `coherent` at all: unsafe, a bound on what coherence costs) on the four models, two
# rounds; profiles; the H100 tests the chain touches (with chain on: auto); the issue-7 stage if time is left.
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
echo "models ready $(( $(date +%s) - T0 )) s"
dec() {  # label model args...   (HOME_ from the environment: the tree)
  local label=$1 m=$2; shift 2
  DOPPLER_HOME=${HOME_:-$PWD} timeout 90 $B recipes/bench/decode.lua --model $m --label "$label" --prompt-tokens 32 \
    --tokens 128 "$@" >>"$OUT/32c_decode.jsonl" 2>>"$OUT/32c_err.txt"
}
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf $G $L; do
    dec off $m --runs 2 --no-profile --hint chain=off
    dec chain $m --runs 2 --no-profile
    HOME_=$PWD/.abC dec nocoherent $m --runs 2 --no-profile
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do dec chain-profile $m --runs 1 --profile-tokens 16; done
python3 - "$OUT/32c_decode.jsonl" <<'PY'
import json, sys, collections
p50 = collections.defaultdict(list); tok = collections.defaultdict(list); sub = {}
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        key = (d["model"].split("/")[-1][:14], d["label"])
        p50[key].append(d["p50_ms"]); tok[key].append(d["decode_tok_s"]); sub[key] = (d["submits_per_token"], d["readback_bytes_per_token"])
        if d["gpu_ms_per_kernel"]:
            print(key, {k: round(v, 4) for k, v in sorted(d["gpu_ms_per_kernel"].items(), key=lambda x: -x[1])})
for key in p50:
    print("%-16s %-14s p50 %s  tok/s %s  submits %.4f readback %.2f" % (key[0], key[1], " ".join("%.4f" % x for x in p50[key]),
          " ".join("%.1f" % x for x in tok[key]), sub[key][0], sub[key][1]))
PY
for t in chain gguf_fixtures gpu_loop gemma3_fixtures families_fixtures lm_head_fusion fuse_attn side_prefetch; do
  [ -f tests/lua/test_$t.lua ] || continue
  timeout 200 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/32c_h100_tests.txt"
done
echo "tests done $(( $(date +%s) - T0 )) s"
if [ $(( $(date +%s) - T0 )) -lt 420 ]; then
  OUT=$OUT STAGES=issue7 B=$B bash scripts/device/h100-bench.sh 2>&1 | grep -E '^issue7 [^ ]+ (decode|prefill|ttft) ' | awk '!seen[$2 $3]++'
fi
tail -3 "$OUT/32c_err.txt"
echo "done $(( $(date +%s) - T0 )) s"
