#!/bin/bash
# The plans of every fixture model under several hint sets, by the lowering rules of two trees: OLD (a checkout
# of the commit before the split of lower.lua) and NEW (this tree); any difference is printed and fails.
# OLD=/path/to/old/tree bash docs/bench-data/run50/50a_plan_fingerprint.sh   (env as the tests': VK_ICD_FILENAMES,
# DOPPLER_FIXTURES; DOPPLER_BIN defaults to build/doppler; MODELS a list of model paths, SETS the indices of the
# hint sets below to run, default all)
set -u
NEW=${NEW:-$PWD}; BIN=${DOPPLER_BIN:-$PWD/build/doppler}; F=${DOPPLER_FIXTURES:-$PWD/tests/fixtures}
OUTD=${OUTD:-/tmp/fp}; mkdir -p "$OUTD"
MODELS="${MODELS:-$F/models/gemma3-tiny $F/models/gemma3-tiny-scaled $F/models/llama3-tiny $F/models/mistral-tiny
 $F/models/mixtral-tiny $F/models/phi3-tiny $F/models/qwen2-tiny $F/models/qwen3-tiny
 $F/gguf/gemma3-q/model-Q4_K_M.gguf $F/gguf/gemma3-q/model-Q4_0.gguf $F/gguf/gemma3-q/model-Q5_K_M.gguf
 $F/gguf/gemma3-q/model-Q8_0.gguf $F/gguf/llama-q/model-Q4_K_M.gguf $F/gguf/llama-q/model-Q8_0.gguf}"
HINTSETS=(""
  "--hint fusion=off" "--hint matmul=gemv" "--hint matmul=gemm" "--hint precision=f32" "--hint decode_chunk=1"
  "--hint attention_splits=4" "--hint q_matmul=dequant_f16" "--hint q_matmul=fused" "--hint attention_decode=basic"
  "--hint gemv_q_x=q8x2" "--hint lm_head_groups=1" "--hint attention_prefill=flash" "--hint glu_down=on"
  "--hint lm_head_queue=on --hint lm_head_groups=2")
norm() { sed -E "s#$OLD|$NEW##g; s#lua/lib/doppler/lower(/[a-z]+)?\.lua:[0-9]+#lower#g" "$1"; }
n=0; bad=0
for m in $MODELS; do
  for i in ${SETS:-${!HINTSETS[@]}}; do
    h=${HINTSETS[$i]}; tag=$(basename "$m")_$i
    timeout 120 env DOPPLER_HOME=$OLD "$BIN" "$NEW/docs/bench-data/run50/50a_plan_fingerprint.lua" --model "$m" $h > "$OUTD/old_$tag" 2>&1
    timeout 120 env DOPPLER_HOME=$NEW "$BIN" "$NEW/docs/bench-data/run50/50a_plan_fingerprint.lua" --model "$m" $h > "$OUTD/new_$tag" 2>&1
    n=$((n + 1))
    # an error names the tree and the rule file's line: compared without them
    if ! diff <(norm "$OUTD/old_$tag") <(norm "$OUTD/new_$tag") > "$OUTD/diff_$tag"; then
      bad=$((bad + 1)); echo "DIFFERS: $m $h"; head -5 "$OUTD/diff_$tag"
    fi
  done
done
echo "$n model x hint sets, $bad differ; lines compared: $(cat "$OUTD"/new_* | wc -l)"
echo "runs that ended in an error (the same on both sides where no difference is listed): $(grep -l "^doppler:" "$OUTD"/new_* | wc -l)"
[ "$bad" = 0 ]
