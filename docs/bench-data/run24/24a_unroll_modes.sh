#!/bin/bash
# cold/warm GPU ms per kernel under three DP_UNROLL settings on the CPU device
cd /work/main
export VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json
G=tests/fixtures/gguf/gemma3-q/model-Q4_K_M.gguf
IDS=186,421,211,188,113,92,83,493,76,325,290,79,386,487,309,373,205,438,79,115,154,63,203,436
cp shaders/include/dp_common.glsl /tmp/dpc.keep
for mode in none unroll dont; do
  cp /tmp/dpc.keep shaders/include/dp_common.glsl
  [ $mode = unroll ] && sed -i 's/^#define DP_UNROLL$/#define DP_UNROLL [[unroll]]/' shaders/include/dp_common.glsl
  [ $mode = dont ] && sed -i 's/^#define DP_UNROLL$/#define DP_UNROLL [[dont_unroll]]/' shaders/include/dp_common.glsl
  rm -rf /tmp/mc8; mkdir /tmp/mc8
  for r in cold warm; do
    for m in "tests/fixtures/models/gemma3-tiny" "tests/fixtures/models/llama3-tiny" "$G"; do
      MESA_SHADER_CACHE_DIR=/tmp/mc8 build/doppler run --model $m --ids $IDS --max-tokens 16 --profile 2>&1 | \
        awk -v mode=$mode -v r=$r -v m=$(basename $m) '/^prompt/{ph="P"} /^decode/{ph="D"} /^  [a-z_]+ +[0-9.]+ ms/{v=$2; if(ph=="D") v=v*15; printf "%s %s %s %s%s %.0f\n", mode, r, m, ph, $1, v}'
    done
  done
done
cp /tmp/dpc.keep shaders/include/dp_common.glsl
