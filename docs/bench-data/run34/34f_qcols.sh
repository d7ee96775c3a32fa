#!/usr/bin/env bash
# Run 34f (session 27), nvidia-h100-x1: the fused MLP with down read by its own Q4_K / Q6_K blocks re-laid by
# columns (the default now, 64 rows / 512 invocations) against its f16 columns (glu_down_cols=f16) and against
# glu_down=off, three rounds, Gemma 3 1B and Llama 3.2 1B Q4_K_M; 32 rows / 256; profiles; the H100 tests.
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
    --tokens 128 "$@" >>"$OUT/34f_decode.jsonl" 2>>"$OUT/34f_err.txt"
}
for round in 1 2 3; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
    dec off $m --runs 2 --no-profile --hint glu_down=off
    dec on $m --runs 2 --no-profile --hint glu_down=on
    dec on-f16cols $m --runs 2 --no-profile --hint glu_down=on --hint glu_down_cols=f16
    dec on-r32-wg256 $m --runs 2 --no-profile --hint glu_down=on --hint glu_down_rows=32 --hint glu_down_wg=256
  done
  echo "round $round done $(( $(date +%s) - T0 )) s"
done
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf; do
  dec off-profile $m --runs 1 --profile-tokens 16 --hint glu_down=off
  dec on-profile $m --runs 1 --profile-tokens 16 --hint glu_down=on
done
python3 - "$OUT/34f_decode.jsonl" <<'PY'
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
echo "decode done $(( $(date +%s) - T0 )) s"
for t in glu_down gguf_fixtures; do
  timeout 150 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t: $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/34f_h100_tests.txt"
done
tail -3 "$OUT/34f_err.txt"
echo "done $(( $(date +%s) - T0 )) s"
