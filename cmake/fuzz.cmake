# libFuzzer targets (fuzz/, docs/testing.md "Fuzzing"). libFuzzer needs clang and the main build
# uses g++, so fuzz/ is a separate CMake project that this file configures with clang and builds as
# part of the main build (ExternalProject, target tg_fuzzers), then registers its CTest tests here
# under the label fuzz.
#
# clang 15 or later: the library uses std::source_location, which libstdc++ 12 provides only to
# compilers with __builtin_source_location (clang-14 lacks it). Debian 12: clang-16 and
# libclang-rt-16-dev (scripts/setup.sh installs them).
find_program(TG_FUZZ_CXX NAMES clang++-16 clang++-15 DOC "clang++ (15 or later) for the libFuzzer targets")
set(TG_FUZZ_AVAILABLE OFF)
if(TG_FUZZ_CXX)
  execute_process(COMMAND ${TG_FUZZ_CXX} -print-runtime-dir OUTPUT_VARIABLE TG_FUZZ_RUNTIME_DIR
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  file(GLOB TG_FUZZ_RUNTIME "${TG_FUZZ_RUNTIME_DIR}/libclang_rt.fuzzer*.a")
  if(TG_FUZZ_RUNTIME)
    set(TG_FUZZ_AVAILABLE ON)
  endif()
endif()
option(TG_BUILD_FUZZERS "Build the libFuzzer targets in fuzz/ with clang and test them (label fuzz)"
       ${TG_FUZZ_AVAILABLE})
if(NOT TG_BUILD_FUZZERS)
  if(NOT TG_FUZZ_AVAILABLE)
    message(STATUS "fuzz: no clang++-16/15 with libFuzzer (Debian: clang-16 libclang-rt-16-dev); "
                   "the fuzz targets and the fuzz label are off")
  endif()
  return()
endif()
if(NOT TG_FUZZ_AVAILABLE)
  message(FATAL_ERROR "TG_BUILD_FUZZERS is ON but no clang++-16/15 with libFuzzer was found "
                      "(Debian: apt-get install clang-16 libclang-rt-16-dev)")
endif()

include(ExternalProject)
set(TG_FUZZ_BINARY_DIR ${PROJECT_BINARY_DIR}/fuzz)
set(TG_FUZZ_TARGETS parse_graph safetensors build_graph)
set(TG_FUZZ_BYPRODUCTS)
foreach(target ${TG_FUZZ_TARGETS})
  list(APPEND TG_FUZZ_BYPRODUCTS ${TG_FUZZ_BINARY_DIR}/${target}_fuzzer)
endforeach()
ExternalProject_Add(tg_fuzzers
  SOURCE_DIR ${PROJECT_SOURCE_DIR}/fuzz
  BINARY_DIR ${TG_FUZZ_BINARY_DIR}
  CMAKE_ARGS -DCMAKE_CXX_COMPILER=${TG_FUZZ_CXX} -DTG_WERROR=${TG_WERROR}
             -DCMAKE_EXPORT_COMPILE_COMMANDS=OFF
  BUILD_ALWAYS ON  # the sub-build's own make decides what changed in src/ or fuzz/
  INSTALL_COMMAND ""
  BUILD_BYPRODUCTS ${TG_FUZZ_BYPRODUCTS})

if(NOT TG_BUILD_TESTS)
  return()
endif()
# Per target: fuzz.<target> fuzzes for TG_FUZZ_SECONDS (environment at test time, default 30) from
# the seed corpus, keeping what it finds in the build tree (never in the source tree);
# fuzz.<target>.regressions replays fuzz/regressions/<target>/* once each. fuzz/run_fuzzer.sh
# bounds each run itself, so the test timeout only needs to be past any length asked for.
set(TG_FUZZ_SYMBOLIZER)
find_program(TG_LLVM_SYMBOLIZER NAMES llvm-symbolizer-16 llvm-symbolizer-15 llvm-symbolizer)
if(TG_LLVM_SYMBOLIZER)
  set(TG_FUZZ_SYMBOLIZER "ASAN_SYMBOLIZER_PATH=${TG_LLVM_SYMBOLIZER}")
endif()
foreach(target ${TG_FUZZ_TARGETS})
  add_test(NAME fuzz.${target}
           COMMAND ${CMAKE_COMMAND} -E env ${TG_FUZZ_SYMBOLIZER}
                   bash ${PROJECT_SOURCE_DIR}/fuzz/run_fuzzer.sh fuzz ${TG_FUZZ_BINARY_DIR}/${target}_fuzzer ${target}
                   ${PROJECT_BINARY_DIR}/fuzz-work/${target})
  add_test(NAME fuzz.${target}.regressions
           COMMAND ${CMAKE_COMMAND} -E env ${TG_FUZZ_SYMBOLIZER}
                   bash ${PROJECT_SOURCE_DIR}/fuzz/run_fuzzer.sh regressions ${TG_FUZZ_BINARY_DIR}/${target}_fuzzer
                   ${target})
  set_tests_properties(fuzz.${target} PROPERTIES LABELS fuzz TIMEOUT 86400)
  set_tests_properties(fuzz.${target}.regressions PROPERTIES LABELS fuzz TIMEOUT 300)
endforeach()
