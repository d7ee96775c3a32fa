#!/usr/bin/env bash
# run23/23_lvp_ab.sh: session 16's CPU-device rules on lavapipe (this machine's 2 cores, not the H100), the tree
# before them (f5e7cb7, through DOPPLER_HOME) against the working tree, one binary (build/doppler), two rounds:
#   a. gemma3-tiny, 40 tokens drawn at temperature 0.8 (the GPU loop): GPU ms per token of the float GEMVs
#      and the fused LM head (lower.gemv_float_default, lm_head_groups' CPU cap)
#   b. the Gemma-shaped GGUF fixture (Q4_K_M), f32, its 56 tokens one at a time: attention_decode's chunks
#      (lower.attention_decode_chunks' CPU rule)
# Usage: bash docs/bench-data/run23/23_lvp_ab.sh > docs/bench-data/run23/23_lvp_ab.txt
set -euo pipefail
cd "$(dirname "$0")/../../.."
export VK_ICD_FILENAMES=${VK_ICD_FILENAMES:-/usr/share/vulkan/icd.d/lvp_icd.x86_64.json}
OLD=${OLD:-/tmp/doppler_f5e7cb7}
rm -rf "$OLD" && mkdir -p "$OLD"
git archive f5e7cb7 shaders lua recipes | tar -x -C "$OLD"
G=tests/fixtures/gguf/gemma3-q
IDS=$(python3 -c "import json; print(','.join(map(str, json.load(open('$G/reference-Q4_K_M.json'))['all_ids'])))")
for round in 1 2; do
  for tree in before after; do
    home=$PWD; [ "$tree" = before ] && home=$OLD
    echo "== round $round, $tree: a. gemma3-tiny, 40 tokens, temperature 0.8"
    DOPPLER_HOME=$home build/doppler run --model tests/fixtures/models/gemma3-tiny --ids 2,10,20,30,7 \
      --max-tokens 40 --print-ids --quiet --profile --temperature 0.8 2>&1 |
      sed -n '/^decode:/,$p' | grep -E "^decode:|lm_head|gemv|attention_decode|\(sum\)"
    echo "== round $round, $tree: b. $G Q4_K_M, f32, 56 tokens one at a time"
    DOPPLER_HOME=$home build/doppler run --model $G/model-Q4_K_M.gguf --ids "$IDS" --max-tokens 0 \
      --logits-out /tmp/23_lvp_ab.f32 --hint prefill_chunk=1 --hint precision=f32 --profile 2>&1 |
      grep -E "^prompt:|gemv_q|attention_decode|\(sum\)"
  done
done
