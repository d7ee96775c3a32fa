#!/bin/bash
# Run 42e (session 35): a decode token as if every kernel only read its bytes. read_chain.lua --sizes runs one
# dependent read-only dispatch per kernel of the token, at the bytes that kernel reads (the sizes below, from
# the models' shapes and the tensor types doppler convert --quant q4_k_m gives them, as the BENCHMARKS entry
# derives them), 4 tokens per submit, against doppler's own decode of the same model in the same call, with
# and without the side prefetcher (read_chain reads nothing ahead). On the lent GPU machine:
#   bash docs/bench-data/run42/42e_token_floor.sh                        (Q4_K_M: gemma, llama)
#   RUN=42f MODELS="gemma-f16 llama-f16" bash docs/bench-data/run42/42e_token_floor.sh   (42f: the F16 models)
. scripts/device/env.sh
RUN=${RUN:-42e}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/${RUN}_gpu.txt 2>&1
sizes() {   # model -> the comma-separated bytes of one token's dispatches
  python3 - "$1" <<'PY'
import sys
m = sys.argv[1]
def q6(i, n): return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2   # llama.cpp's use_more_bits
r16 = lambda b: (b + 15) // 16 * 16
out = [16]                                                          # embed_norm (one row: next to nothing)
if m == "gemma":
    H, Q, KV, I, L, V = 1152, 1024, 256, 6912, 26, 262144
    for i in range(L):
        out += [(Q + 2 * KV) * H * 2,                                # q/k/v, f16 copies (gemv_multi)
                r16(96 * KV * 2 * 2),                               # attention: ~96 keys of k and v, f16
                H * Q * 2,                                          # o, f16 copy
                2 * I * H * 22 // 32 + H * I * (32 if q6(i, L) else 24) // 32]   # gate+up Q5_0, down columns
    out += [V * H * 34 // 32]                                       # LM head, Q8_0
elif m == "gemma-f16":                                              # gemv_multi: q/k/v, gate+up; gemv: o, down
    H, Q, KV, I, L, V = 1152, 1024, 256, 6912, 26, 262144
    for i in range(L):
        out += [(Q + 2 * KV) * H * 2, r16(96 * KV * 2 * 2), H * Q * 2, 2 * I * H * 2, H * I * 2]
    out += [V * H * 2]                                              # LM head, f16
elif m == "llama-f16":
    H, Q, KV, I, L, V = 2048, 2048, 512, 8192, 16, 128256
    for i in range(L):
        out += [(Q + 2 * KV) * H * 2, r16(96 * KV * 2 * 2), H * Q * 2, 32768, 2 * I * H * 2, H * I * 2]
    out += [V * H * 2]
else:
    H, Q, KV, I, L, V = 2048, 2048, 512, 8192, 16, 128256
    for i in range(L):
        out += [(Q + 2 * KV) * H * 2, r16(96 * KV * 2 * 2), H * Q * 2,
                32768,                                              # add_rmsnorm (two vectors and the sum)
                2 * I * H * 144 // 256 + H * I * (32 if q6(i, L) else 24) // 32]  # gate+up Q4_K, down columns
    out += [V * H * 210 // 256]                                     # LM head, Q6_K
out += [16]                                                         # advance (argmax over the head's candidates)
print(",".join(str(r16(b)) for b in out), len(out), sum(out))
PY
}
for m in ${MODELS:-gemma llama}; do
  read list n total < <(sizes $m)
  echo "$m steps $n bytes $total" >> $OUT/${RUN}_summary.txt
  $B recipes/bench/read_chain.lua --sizes $list --regions $n --steps $((4 * n)) --groups auto --loads 4 --runs 9 \
    --label "$m floor" >> $OUT/${RUN}_floor.jsonl 2>> $OUT/${RUN}_err.txt
  case $m in *-f16) path=$(model ${m%-f16});; *) path=$(model $m-q4_k_m);; esac
  for i in 1 2; do
    for h in side_prefetch=auto side_prefetch=off; do
      $B recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 1 --no-profile --hint $h \
        --label "$m $h $i" >> $OUT/${RUN}_decode.jsonl 2>> $OUT/${RUN}_err.txt
    done
  done
  $B recipes/bench/decode.lua --model $path --prompt-tokens 32 --tokens 128 --runs 1 --hint side_prefetch=off \
    --label "$m side_prefetch=off p" >> $OUT/${RUN}_decode.jsonl 2>> $OUT/${RUN}_err.txt
done
python3 - "$OUT" "$RUN" >> $OUT/${RUN}_summary.txt <<'PY'
import json, sys
for l in open(sys.argv[1] + "/" + sys.argv[2] + "_floor.jsonl"):
    d = json.loads(l)
    ms = d["wall_us_per_run"] / 4e3
    print("%-12s floor: wall %.4f ms per token (%.1f tok/s), GPU %.4f ms per token; %.3f GB per token" % (
        d["label"], ms, 1e3 / ms, d.get("gpu_us_per_run", 0) / 4e3, d["bytes_per_run"] / 4e9))
for l in open(sys.argv[1] + "/" + sys.argv[2] + "_decode.jsonl"):
    d = json.loads(l)
    print("%-30s decode %.1f tok/s p50 %.4f ms gpu %.4f" % (d["label"], d["decode_tok_s"], d["p50_ms"], d.get("gpu_ms_per_token", 0)))
PY
cat $OUT/${RUN}_summary.txt
