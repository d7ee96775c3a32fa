# tests/fuzz/fuzz.cmake: libFuzzer targets (included when -DDOPPLER_FUZZ=ON). Every
# tests/fuzz/fuzz_<name>.c defines LLVMFuzzerTestOneInput and becomes the executable fuzz_<name>,
# with its seed corpus in tests/fuzz/corpus/<name>/. Build with clang:
#   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DDOPPLER_FUZZ=ON -DDOPPLER_TESTS=OFF
#   make -C build-fuzz fuzz_gguf && ./build-fuzz/fuzz_gguf tests/fuzz/corpus/gguf -max_total_time=60
# `ctest -L fuzz` runs each for DOPPLER_FUZZ_SECONDS (default 60), writing new inputs to the build
# tree (the checked-in corpus is only read). Each corpus file of a target that reads several formats
# starts with the byte that picks the reader (fuzz_manifest, fuzz_hfconfig).
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "DOPPLER_FUZZ needs clang (CC=clang): libFuzzer is part of clang's runtime")
endif()
set(DOPPLER_FUZZ_SECONDS 60 CACHE STRING "seconds each fuzz target runs under ctest")
enable_testing()
set(DP_FUZZ_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)

# The parsers live in core/; the fuzz build compiles core (not gpu/ or lua/) with the sanitizers.
file(GLOB DP_FUZZ_CORE CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/core/*.c ${CMAKE_SOURCE_DIR}/core/formats/*.c ${CMAKE_SOURCE_DIR}/core/text/*.c)
add_library(doppler_fuzz_core STATIC ${DP_FUZZ_CORE})
target_include_directories(doppler_fuzz_core PUBLIC ${CMAKE_SOURCE_DIR} ${DP_INCLUDE_DIRS})
target_compile_definitions(doppler_fuzz_core PUBLIC DOPPLER_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_compile_options(doppler_fuzz_core PUBLIC ${DP_FUZZ_FLAGS})
# Only the libraries core/ uses: linking shaderc under the sanitizers drags in glslang symbols
# that Debian's libshaderc.so leaves undefined.
pkg_check_modules(DP_FUZZ_DEPS REQUIRED IMPORTED_TARGET json-c libutf8proc libpcre2-8 libxxhash zlib yaml-0.1)
target_link_libraries(doppler_fuzz_core PUBLIC PkgConfig::DP_FUZZ_DEPS -lm)

file(GLOB DP_FUZZ_TARGETS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_*.c)
foreach(src ${DP_FUZZ_TARGETS})
  get_filename_component(name ${src} NAME_WE)            # fuzz_gguf
  string(REGEX REPLACE "^fuzz_" "" corpus ${name})       # gguf
  add_executable(${name} ${src})
  target_link_libraries(${name} PRIVATE doppler_fuzz_core)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  if(TRUE)   # registered in fuzz builds too (DOPPLER_TESTS=OFF there): scripts/test.sh runs `ctest -L fuzz`
    set(work ${CMAKE_BINARY_DIR}/fuzz-corpus/${corpus})
    file(MAKE_DIRECTORY ${work})
    add_test(NAME fuzz.${corpus}
             COMMAND ${name} ${work} ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${corpus}
                     -max_total_time=${DOPPLER_FUZZ_SECONDS} -rss_limit_mb=2048 -timeout=10
                     -artifact_prefix=${CMAKE_BINARY_DIR}/fuzz-)
    set_tests_properties(fuzz.${corpus} PROPERTIES LABELS fuzz TIMEOUT 900
      ENVIRONMENT "DOPPLER_FIXTURES=${CMAKE_SOURCE_DIR}/tests/fixtures")
  endif()
endforeach()
