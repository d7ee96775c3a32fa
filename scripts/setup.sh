#!/usr/bin/env bash
# scripts/setup.sh: the README's first command. On a fresh Debian 12 machine it installs the
# packages, builds doppler, makes the synthetic default model (Gemma 3 270M shapes, seeded random
# f16 weights, the real Gemma 3 tokenizer) and generates text with it on the Vulkan device
# (lavapipe when there is no GPU). Extra arguments go to the generation command.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

bash scripts/install-deps.sh
cmake -S . -B build -DDOPPLER_TESTS=OFF >/dev/null
cmake --build build -j "$JOBS"

MODEL=models/synthetic/gemma-3-270m
if [ ! -f "$MODEL/model.safetensors" ]; then
  ./build/doppler synth --config models/configs/gemma-3-270m.config.json \
      --tokenizer tests/fixtures/tokenizers/gemma3.tokenizer.json.gz --out "$MODEL" --dtype f16 --seed 0
fi
./build/doppler devices | sed -n 1p   # the device that will run (sed reads on: no SIGPIPE under pipefail)
if [ $# -eq 0 ]; then set -- --prompt "The capital of France is" --max-tokens 32; fi
exec ./build/doppler recipes/gemma3.lua "$@"
