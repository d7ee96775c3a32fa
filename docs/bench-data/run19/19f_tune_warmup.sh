#!/usr/bin/env bash
# 19f: doppler tune's scores without and with the clock warm-up (--warmup-ms 0 / 300), twice, in one call
set -u
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export DOPPLER_CACHE_DIR=/tmp/dpc B=$PWD/build-h100/doppler DOPPLER_BIN=$PWD/build-h100/doppler
[ -f /usr/lib/x86_64-linux-gnu/libvulkan.so.1 ] || { for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; }
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
G=/tmp/g1b Q=/tmp/g1b-q4_k_m.gguf
[ -d $G ] || $B synth --config models/configs/gemma-3-1b-it.config.json --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out $G --dtype f16 >/dev/null 2>&1
[ -f $Q ] || $B convert $G --quant q4_k_m --out $Q --no-manifest --quiet
for w in 0 300 0 300; do
  timeout 200 $B tune --model $Q --quick --knobs gemv_wg,gemv_rows,attention_splits --dry-run --json --warmup-ms $w \
    > $OUT/19f_tune_w$w.$RANDOM.json 2>>$OUT/err.txt
done
timeout 100 $B recipes/bench/decode.lua --model $Q --prompt-tokens 32 --tokens 32 --runs 2 --profile-tokens 32 --label ref >> $OUT/19f_ref.jsonl 2>>$OUT/err.txt
python3 - $OUT <<'PY'
import json,sys,glob,os
for f in sorted(glob.glob(sys.argv[1]+"/19f_tune_w*.json"), key=os.path.getmtime):
    d=json.load(open(f))
    print(os.path.basename(f), "winners", d["hints"], " ".join("%s=%s:%.4f"%(r["knob"],r["value"],r.get("score") or -1) for r in d["results"]))
for l in open(sys.argv[1]+"/19f_ref.jsonl"):
    if l.startswith("{"):
        d=json.loads(l); print("decode.lua", d["run"], "gpu_ms_per_token", d.get("gpu_ms_per_token"), "p50", d.get("p50_ms"))
PY
tail -3 $OUT/err.txt
