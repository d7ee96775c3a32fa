#!/bin/bash
# Session 17 (run 24), lavapipe on the development machine: the tree before (cf890ff, through DOPPLER_HOME) against
# this one, one binary (build/doppler of this tree; the old tree's shaders and Lua are read from /tmp/ab24A).
#   a. the first-dispatch cost per kernel: a fresh Mesa shader cache per tree (MESA_SHADER_CACHE_DIR), then the
#      same run again on the filled cache; GPU ms per kernel from --profile (decode: per token x 15 tokens).
#   b. the tiled GEMM on lavapipe: gemm_q (Gemma-shaped Q4_K_M fixture, precision=f32) for 12, 24 and 56
#      prompt tokens, and the float gemm (gemma3-tiny, matmul=gemm) for 24; the third of three runs each.
# Output: docs/bench-data/run24/24_lvp_ab.txt
set -u
cd "$(dirname "$0")/../../.."
export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
rm -rf /tmp/ab24A && mkdir -p /tmp/ab24A && git archive cf890ff shaders lua recipes | tar -x -C /tmp/ab24A
G=tests/fixtures/gguf/gemma3-q/model-Q4_K_M.gguf
IDS56=186,421,211,188,113,92,83,493,76,325,290,79,386,487,309,373,205,438,79,115,154,63,203,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436,436
IDS24=$(echo $IDS56 | cut -d, -f1-24); IDS12=$(echo $IDS56 | cut -d, -f1-12)
for tree in before after; do
  home=$PWD; [ $tree = before ] && home=/tmp/ab24A
  rm -rf /tmp/ab24_mesa && mkdir /tmp/ab24_mesa
  for r in cold warm; do
    for m in tests/fixtures/models/gemma3-tiny tests/fixtures/models/llama3-tiny $G; do
      DOPPLER_HOME=$home DOPPLER_CACHE_DIR=/tmp/ab24_spv_$tree MESA_SHADER_CACHE_DIR=/tmp/ab24_mesa \
        build/doppler run --model $m --ids $IDS24 --max-tokens 16 --profile 2>&1 | \
        awk -v t=$tree -v r=$r -v m=$(basename $m) '/^prompt/{ph="P"} /^decode/{ph="D"} /^  \(sum\)/{$1="(sum)"}
          /^  [a-z_()]+ +[0-9.]+ ms/{v=$2; if(ph=="D") v=v*15; printf "a %s %s %s %s:%s %.0f\n", t, r, m, ph, $1, v}'
    done
  done
  for ids in $IDS12 $IDS24 $IDS56; do
    n=$(echo $ids | tr , '\n' | wc -l)
    for i in 1 2 3; do
      o=$(DOPPLER_HOME=$home DOPPLER_CACHE_DIR=/tmp/ab24_spv_$tree build/doppler run --model $G --ids $ids --max-tokens 0 \
          --profile --hint precision=f32 2>&1 | awk '/^  gemm_q /{print $2}')
    done
    echo "b $tree gemm_q T=$n $o ms"
  done
  for i in 1 2 3; do
    o=$(DOPPLER_HOME=$home DOPPLER_CACHE_DIR=/tmp/ab24_spv_$tree build/doppler run --model tests/fixtures/models/gemma3-tiny \
        --ids $IDS24 --max-tokens 0 --profile --hint matmul=gemm 2>&1 | awk '/^  gemm /{print $2}')
  done
  echo "b $tree gemm(float) T=24 $o ms"
done
