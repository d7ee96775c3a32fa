# tests/fuzz/fuzz.cmake: every tests/fuzz/fuzz_*.c is a libFuzzer target (clang; Debian's libclang-rt).
#   CC=clang cmake -S . -B build-fuzz -DDOPPLER_FUZZ=ON -DDOPPLER_TESTS=OFF && make -C build-fuzz -j2
#   (cd build-fuzz && ctest -L fuzz)      # each target runs DOPPLER_FUZZ_SECONDS (60) on its corpus
# The core sources are compiled into each target again, instrumented; the seed corpus in
# tests/fuzz/corpus/<target>/ is read only, new inputs go to the build tree.
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "DOPPLER_FUZZ needs clang: CC=clang cmake -DDOPPLER_FUZZ=ON ...")
endif()
set(DOPPLER_FUZZ_SECONDS 60 CACHE STRING "seconds each fuzz target runs under ctest")
if(NOT DOPPLER_TESTS)
  enable_testing()
endif()

# core/ needs only these (no Vulkan, no shaderc, no Lua)
pkg_check_modules(FUZZDEPS REQUIRED IMPORTED_TARGET json-c libutf8proc libpcre2-8 libxxhash zlib)

file(GLOB DP_FUZZ_TARGETS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_*.c)
file(GLOB DP_FUZZ_CORE CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/core/*.c ${CMAKE_SOURCE_DIR}/core/formats/*.c ${CMAKE_SOURCE_DIR}/core/text/*.c)
foreach(src ${DP_FUZZ_TARGETS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src} ${DP_FUZZ_CORE})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR} ${DP_INCLUDE_DIRS})
  target_compile_definitions(${name} PRIVATE DOPPLER_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  target_link_libraries(${name} PRIVATE PkgConfig::FUZZDEPS -lm)
  set(work ${CMAKE_BINARY_DIR}/fuzz-corpus/${name})
  add_test(NAME fuzz.${name}
    COMMAND sh -c "mkdir -p '${work}' && exec '$<TARGET_FILE:${name}>' -max_total_time=${DOPPLER_FUZZ_SECONDS} -timeout=20 -rss_limit_mb=4096 '${work}' '${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/${name}'")
  set_tests_properties(fuzz.${name} PROPERTIES LABELS fuzz TIMEOUT 900
    ENVIRONMENT "DOPPLER_FIXTURES=${CMAKE_SOURCE_DIR}/tests/fixtures")
endforeach()
