#!/usr/bin/env bash
# norm folded into q/k/v only (fusion=-norm_gate_up) vs no fold; the machine already has models and loader.
set -u
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export DOPPLER_CACHE_DIR=/tmp/dpc B=$PWD/build-h100/doppler DOPPLER_BIN=$PWD/build-h100/doppler
[ -f /usr/lib/x86_64-linux-gnu/libvulkan.so.1 ] || { for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; }
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
G=/tmp/g1b L=/tmp/l1b Q=/tmp/g1b-q4_k_m.gguf LQ=/tmp/l1b-q4_k_m.gguf
ls $G $Q $L >/dev/null || exit 1
J=$OUT/17_fold_qkv.jsonl
run() { local lab=$1 m=$2 prof=$3; shift 3
  local hs=""; for h in "$@"; do hs="$hs --hint $h"; done
  local p="--no-profile"; [ $prof = 1 ] && p="--profile-tokens 16"
  DOPPLER_PROFILE_SHAPES=1 timeout 120 $B recipes/bench/decode.lua --model $m --prompt-tokens 32 --tokens 128 $hs --runs 2 $p --label $lab >> $J 2>>$OUT/err.txt; }
run warm $G 0
for round in 1 2; do for m in $G $Q $L; do n=$(basename $m .gguf)
  run $n-nofold$round $m 0 fusion=-norm_qkv,-norm_gate_up
  run $n-qkvfold$round $m 0 fusion=-norm_gate_up
done; done
run prof-g1b-qkvfold $G 1 fusion=-norm_gate_up
python3 - $J <<'PY'
import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        d=json.loads(l); k=d.get("gpu_ms_per_kernel") or {}
        s=" ".join("%s=%.3f"%(a,b) for a,b in sorted(k.items()) if b>0.02) if d["label"].startswith("prof") else ""
        print(d["label"], "run", d["run"], "decode %.1f"%(d["decode_tok_s"] or 0), "p50", d.get("p50_ms"), "gpu/tok", d.get("gpu_ms_per_token"), s)
PY
