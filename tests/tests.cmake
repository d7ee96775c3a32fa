# tests/tests.cmake: every tests/unit/test_*.c is a cmocka program; every tests/lua/test_*.lua
# runs through `doppler`; every tests/e2e/test_*.sh runs with bash. All run under ctest.
# Each test runs with the Vulkan validation layer on (DOPPLER_VALIDATION=1): any message fails it.
# DOPPLER_TEST_VALIDATION=OFF (the sanitizer stage of scripts/test.sh) sets DOPPLER_VALIDATION=0 instead: the
# stages make the same Vulkan calls, so the layer would repeat the normal stage's checks, and under the
# sanitizers it costs a tenth to a third of a test's time (tests/unit/test_k_quant: 47 -> 33 s).
if(DOPPLER_TEST_VALIDATION)
  set(DP_TEST_VALIDATION 1)
else()
  set(DP_TEST_VALIDATION 0)
endif()
# The tests' SPIR-V cache. scripts/test.sh points the sanitizer build at the normal build's cache: the same
# shaderc turns the same sources into the same SPIR-V (the key holds the source, the defines and the
# compiler), so compiling them again under the sanitizers would only repeat ~70 s of shaderc work.
# test_gpu_runtime and test_gpu_cli still compile into caches of their own.
set(DOPPLER_TEST_SPIRV_CACHE "${CMAKE_BINARY_DIR}/spirv-cache" CACHE PATH "SPIR-V cache directory the tests use")
set(DP_TEST_ENV
  "DOPPLER_VALIDATION=${DP_TEST_VALIDATION}"
  "DOPPLER_HOME=${CMAKE_SOURCE_DIR}"
  "DOPPLER_CACHE_DIR=${DOPPLER_TEST_SPIRV_CACHE}"
  "DOPPLER_FIXTURES=${CMAKE_SOURCE_DIR}/tests/fixtures"
  "DOPPLER_BIN=$<TARGET_FILE:doppler>"
  "LSAN_OPTIONS=suppressions=${CMAKE_SOURCE_DIR}/tests/lsan.supp:print_suppressions=0"
  "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:quarantine_size_mb=32")
# Why quarantine_size_mb=32 (AddressSanitizer's default is 256): freed memory waits in the quarantine, poisoned,
# before it is handed out again, so that a use after free lands on poison. Most of what a test frees is
# lavapipe's and LLVM's (building pipelines), and with 256 MB held back every process keeps touching fresh pages:
# the sanitizer stage spent over a third of its CPU time in the kernel (ctest -j2: 512 s wall, 627 s user, 360 s
# sys; 366 s wall at 32 MB). A use after free is still caught unless 32 MB of other frees come between the free
# and the use (docs/BENCHMARKS.md, session 26).

if(DOPPLER_STATIC_DEPS)
  set(DP_CMOCKA_LIB /usr/lib/x86_64-linux-gnu/libcmocka.so)
else()
  pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
  set(DP_CMOCKA_LIB PkgConfig::CMOCKA)
endif()

file(GLOB DP_UNIT_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/unit/test_*.c)
file(GLOB DP_UNIT_HELPERS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/unit/helpers/*.c)
foreach(src ${DP_UNIT_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src} ${DP_UNIT_HELPERS})
  target_link_libraries(${name} PRIVATE doppler_lib ${DP_CMOCKA_LIB})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit)
  add_test(NAME unit.${name} COMMAND ${name})
  set_tests_properties(unit.${name} PROPERTIES ENVIRONMENT "${DP_TEST_ENV}" TIMEOUT 600)
endforeach()

file(GLOB DP_LUA_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/lua/test_*.lua)
foreach(src ${DP_LUA_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_test(NAME lua.${name} COMMAND doppler ${src} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(lua.${name} PROPERTIES ENVIRONMENT "${DP_TEST_ENV}" TIMEOUT 900)
endforeach()

file(GLOB DP_E2E_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/e2e/test_*.sh)
foreach(src ${DP_E2E_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_test(NAME e2e.${name} COMMAND bash ${src} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(e2e.${name} PROPERTIES ENVIRONMENT "${DP_TEST_ENV}" TIMEOUT 900)
endforeach()
