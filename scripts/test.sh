#!/usr/bin/env bash
# scripts/test.sh: the whole test suite, from a fresh clone (README's second command; .ci/run calls it).
#   1. installs the Debian packages (scripts/install-deps.sh)
#   2. normal build + ctest on lavapipe, Vulkan validation layer on (any message fails the test)
#   3. AddressSanitizer + UndefinedBehaviorSanitizer build + the same ctest run, without the validation layer
#      (the same Vulkan calls as stage 2, whose layer already checked them; tests/tests.cmake)
#   4. every libFuzzer target for DOPPLER_FUZZ_SECONDS (default 60) seconds on its corpus
# Environment: DOPPLER_TEST_STAGES (default "normal asan fuzz"), DOPPLER_FUZZ_SECONDS, JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}
STAGES=${DOPPLER_TEST_STAGES:-"normal asan fuzz"}
FUZZ_SECONDS=${DOPPLER_FUZZ_SECONDS:-60}

bash scripts/install-deps.sh

# Tests must run on lavapipe even where a GPU exists, so that results do not depend on the machine;
# the validation layer must be found even if the loader's search path was customised.
export VK_ICD_FILENAMES=${VK_ICD_FILENAMES:-/usr/share/vulkan/icd.d/lvp_icd.x86_64.json}
export VK_LAYER_PATH=${VK_LAYER_PATH:-/usr/share/vulkan/explicit_layer.d}

failed=0
passed=0
run_stage() {   # name, build dir, cmake args...
  local name=$1 dir=$2; shift 2
  echo "== [$name] configure + build ($dir)"
  cmake -S . -B "$dir" "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
  echo "== [$name] ctest"
  if (cd "$dir" && ctest --output-on-failure -j "$JOBS"); then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
}

for stage in $STAGES; do
  case $stage in
    normal) run_stage normal build ;;
    asan)   # -O2: the CPU references in tests are slow at -O0. The SPIR-V the normal stage compiled is
            # reused (tests/tests.cmake, DOPPLER_TEST_SPIRV_CACHE); the stage compiles what is missing.
            run_stage asan build-asan -DDOPPLER_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDOPPLER_TEST_VALIDATION=OFF \
                      -DDOPPLER_TEST_SPIRV_CACHE="$ROOT/build/spirv-cache" ;;
    fuzz)
      # Only core/ is fuzzed (the parsers of files users hand us): build just the fuzz targets.
      echo "== [fuzz] build (clang, libFuzzer)"
      cmake -S . -B build-fuzz -DDOPPLER_FUZZ=ON -DDOPPLER_TESTS=OFF -DCMAKE_C_COMPILER=clang \
            -DCMAKE_CXX_COMPILER=clang++ -DDOPPLER_FUZZ_SECONDS="$FUZZ_SECONDS" >/dev/null
      targets=$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c; done)
      cmake --build build-fuzz -j "$JOBS" --target $targets
      echo "== [fuzz] each target for ${FUZZ_SECONDS}s"
      if (cd build-fuzz && ctest -L fuzz --output-on-failure -j "$JOBS"); then
        passed=$((passed + 1))
      else
        failed=$((failed + 1))
      fi ;;
    *) echo "unknown stage '$stage'"; exit 2 ;;
  esac
done

echo "stages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
