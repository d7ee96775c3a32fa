#!/usr/bin/env bash
# scripts/install-deps.sh: installs the Debian 12 packages doppler builds, tests and runs with.
# Idempotent: packages already present are skipped, so the README's commands can call it every time.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config clang libclang-rt-14-dev  # toolchain; clang for libFuzzer targets
  liblua5.4-dev                    # embedded Lua 5.4 (recipes, REPL)
  libvulkan-dev vulkan-tools       # Vulkan loader + headers; vulkaninfo for diagnostics
  mesa-vulkan-drivers              # lavapipe: Vulkan on the CPU (CI, machines without a GPU)
  vulkan-validationlayers          # VK_LAYER_KHRONOS_validation, on in every test
  libshaderc-dev glslang-dev spirv-tools  # runtime GLSL -> SPIR-V (static archives for DOPPLER_STATIC_DEPS)
  libyaml-dev                      # model manifests
  libcmocka-dev                    # C unit tests
  libjson-c-dev                    # JSON: tokenizer.json, config.json, safetensors headers (has a static archive)
  libutf8proc-dev                  # Unicode categories and NFC for tokenizers
  libpcre2-dev                     # byte-level BPE split regex (\p{L}, \p{N}) with JIT
  libedit-dev                      # REPL line editing and history (BSD licence)
  libxxhash-dev                    # SPIR-V cache keys
  zlib1g-dev                       # tokenizer.json.gz
  bsdutils                         # script(1): tests/e2e/test_cli.sh runs doppler on a terminal
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
