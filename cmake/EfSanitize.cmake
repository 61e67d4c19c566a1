# SPDX-License-Identifier: MIT
# Sanitizers and fuzzing for host code (tools/sanitize.sh drives both; docs/architecture.md,
# "Sanitizers and fuzzing").
#
# EF_SANITIZE=address,undefined builds every C++ file (library, program, tests) with those
# sanitizers. Undefined behaviour is fatal (-fno-sanitize-recover=all): a test that hits it
# fails instead of printing a line nobody reads. Device code (nvcc) is never instrumented, so
# this is meant for a CUDA-off tree (ENSEMBLEFIT_CUDA=OFF).
#
# EF_FUZZ=ON (clang only) adds libFuzzer targets for the config, formula and CSV parsers
# (tests/fuzz/) and instruments the parser sources for coverage (-fsanitize=fuzzer-no-link; the
# ASan runtime supplies the coverage hooks to every other program, so the same tree runs the
# unit and MPI tests too). Without EF_FUZZ the same targets are built with a small main that
# replays tests/fuzz/corpus/, so the normal suite covers the corpus.
set(EF_SANITIZE "" CACHE STRING "Sanitizers for host code, e.g. address,undefined")
option(EF_FUZZ "Build libFuzzer targets for the parsers (clang; see tests/fuzz/)" OFF)

if(EF_SANITIZE)
  if(EF_HAVE_CUDA)
    message(WARNING "EF_SANITIZE: device code is not instrumented; use -DENSEMBLEFIT_CUDA=OFF "
                    "for a sanitizer tree (tools/sanitize.sh)")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${EF_SANITIZE}>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=all>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=${EF_SANITIZE} -fno-sanitize-recover=all)
endif()
add_feature_info(Sanitizers EF_SANITIZE "host code built with -fsanitize=${EF_SANITIZE}")

if(EF_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "EF_FUZZ=ON needs clang (libFuzzer): CXX=clang++ CC=clang cmake ...")
  endif()
  if(NOT EF_SANITIZE)
    message(FATAL_ERROR "EF_FUZZ=ON needs EF_SANITIZE (e.g. address,undefined) so that a "
                        "memory error is a finding and the coverage hooks have a runtime")
  endif()
  # The sources the fuzz targets drive get coverage feedback; the rest stays as it is.
  set_source_files_properties(
    ${PROJECT_SOURCE_DIR}/src/config/ini_scan.cpp ${PROJECT_SOURCE_DIR}/src/config/fit_config.cpp
    ${PROJECT_SOURCE_DIR}/src/model/formula.cpp ${PROJECT_SOURCE_DIR}/src/io/data_table.cpp
    PROPERTIES COMPILE_OPTIONS -fsanitize=fuzzer-no-link)
endif()
add_feature_info(Fuzzing EF_FUZZ "libFuzzer targets for the config, formula and CSV parsers")
