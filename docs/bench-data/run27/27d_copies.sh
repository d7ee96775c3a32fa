#!/usr/bin/env bash
# Run 27d (session 20), nvidia-h100-x1: 27c's profile had attention, the norms and the LM head slower beside the
# side prefetcher. Its 32 workgroups polled one progress word; here they poll copies of it 256 bytes apart
# (DOPPLER_SIDE_PREFETCH=depth,groups,wg,min_kb,max_mb,copies,backoff), with and without a backoff between
# polls. Then the ids with and without the prefetcher, and H100 tests with it on.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
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
run() {  # setting model args...
  local s=$1 m=$2; shift 2
  DOPPLER_SIDE_PREFETCH=$s timeout 60 $B recipes/bench/decode.lua --model $m --label "pf=$s" --prompt-tokens 32 \
    --tokens 128 --runs 2 "$@" >>"$OUT/27d_decode.jsonl" 2>>"$OUT/err.txt"
}
SETS="0 1,32,256,256,24,1 1,32,256,256,24,32 1,32,256,256,24,32,16 1,32,256,256,24,32,64 1,48,256,256,48,32"
for round in 1 2; do
  for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf $G; do for s in $SETS; do run $s $m --no-profile; done; done
done
for s in 0 1,32,256,256,24,32; do run $s /tmp/g1b-q4_k_m.gguf --profile-tokens 16; done
echo "bench done $(date +%T)"
for m in /tmp/g1b-q4_k_m.gguf /tmp/l1b-q4_k_m.gguf $G; do
  for s in 0 1,32,256,256,24,32; do
    DOPPLER_SIDE_PREFETCH=$s timeout 60 $B run --model $m --prompt "The capital of France is" --max-tokens 200 \
      --print-ids --quiet 2>/dev/null | md5sum | sed "s|^|ids $(basename $m) pf=$s |"
  done
done
export DOPPLER_SIDE_PREFETCH=1,32,256,1,24,32
for t in gpu_loop gguf_fixtures gemma3_fixtures families_fixtures; do
  timeout 300 $B tests/lua/test_$t.lua >/tmp/t_$t.txt 2>&1; echo "test_$t (prefetch on, min 1 KB): $(tail -1 /tmp/t_$t.txt)"
  { echo "== test_$t"; cat /tmp/t_$t.txt; } >>"$OUT/27d_h100_tests.txt"
done
python3 - "$OUT/27d_decode.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d = json.loads(l)
        k = d.get("gpu_ms_per_kernel") or {}
        ks = " ".join("%s=%.3f" % (n, v) for n, v in sorted(k.items(), key=lambda x: -x[1])[:8]) if k else ""
        print(d["model"].split("/")[-1][:16], d["label"], "decode %.1f p50 %.3f" % (d["decode_tok_s"] or 0, d["p50_ms"] or 0), ks)
PY
tail -5 "$OUT/err.txt" 2>/dev/null
