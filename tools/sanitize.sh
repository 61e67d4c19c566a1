#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds ensemblefit with AddressSanitizer + UndefinedBehaviorSanitizer (CUDA off) in
# build-asan/ and runs the unit tests, the MPI tests and the parser fuzzers there (.ci/run runs
# it after the normal suite; a developer runs it as is). A sanitizer report fails its test:
# undefined behaviour aborts (-fno-sanitize-recover=all), ASan errors always do, and LeakSanitizer
# reports leaks except those of OpenMPI/OpenMP/HDF5 internals listed in tools/lsan.supp.
#
# Usage: tools/sanitize.sh [--no-fuzz] [--fuzz-seconds N] [--build-only] [--ci] [-- CTEST_ARGS...]
#   --no-fuzz         g++ instead of clang, no libFuzzer targets (the corpus is still replayed)
#   --fuzz-seconds N  seconds per fuzz target (default 60)
#   --ci              only the MPI tests of $ci_mpi below (what .ci/run runs), not all of them
#   CTEST_ARGS        replace the default selection (-L unit, -L mpi, -L fuzz), e.g. -- -R fuzz
# Each stage's wall time (build, unit tests, MPI tests, fuzzers) is printed as
# "sanitize: == STAGE: N s", and appended as "STAGE N" to the file $EF_STAGE_LOG when set.
# EF_SANITIZE_CMAKE_ARGS adds CMake options to this tree (tools/setup.sh's EF_CMAKE_ARGS does
# not apply here: it may turn CUDA on). Needs clang with libFuzzer (Debian: clang
# libclang-rt-14-dev libomp-dev), installed when missing, as tools/setup.sh does for the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz=1 seconds=60 build_only=0 ci=0 ctest_args=()
while [ $# -gt 0 ]; do
    case $1 in
        --no-fuzz) fuzz=0 ;;
        --fuzz-seconds) seconds=$2; shift ;;
        --build-only) build_only=1 ;;
        --ci) ci=1 ;;
        --) shift; ctest_args=("$@"); break ;;
        *) echo "sanitize.sh: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
    esac
    shift
done
t0=$SECONDS
say() { echo "sanitize: $*"; }
stage_done() {  # stage_done NAME START: its wall time, printed and (EF_STAGE_LOG) recorded
    say "== $1: $((SECONDS - $2)) s"
    [ -z "${EF_STAGE_LOG:-}" ] || echo "$1 $((SECONDS - $2))" >> "$EF_STAGE_LOG"
}

if [ $fuzz = 1 ]; then
    missing=()
    for p in clang libclang-rt-14-dev libomp-dev; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        say "installing ${missing[*]} (clang and libFuzzer for the fuzz targets)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
    fi
    compilers=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DEF_FUZZ=ON
               -DEF_FUZZ_SECONDS="$seconds")
    debug=-gline-tables-only
else
    compilers=(-DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ -DEF_FUZZ=OFF)
    debug=-g1
fi
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

t=$t0  # the stage counts clang's installation, where it happens
mkdir -p build-asan
say "configuring build-asan/ (log: build-asan/configure.log)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DENSEMBLEFIT_CUDA=OFF \
      -DEF_SANITIZE=address,undefined "${compilers[@]}" "${launcher[@]}" \
      -DCMAKE_CXX_FLAGS="$debug" ${EF_SANITIZE_CMAKE_ARGS:-} > build-asan/configure.log 2>&1 \
    || { cat build-asan/configure.log; exit 1; }
say "building ($(nproc) jobs; log: build-asan/build.log)"
# The programs the selected tests run (not gpu_tests: it only skips without a GPU).
targets=(ensemblefit unit_tests)
[ $fuzz = 1 ] && targets+=(fuzz_config fuzz_formula fuzz_csv) || targets+=(fuzz_config_replay fuzz_formula_replay fuzz_csv_replay)
cmake --build build-asan -j"$(nproc)" --target "${targets[@]}" > build-asan/build.log 2>&1 \
    || { grep -E -A5 "error" build-asan/build.log | head -80; exit 1; }
stage_done "sanitizer set-up and build" $t
[ $build_only = 1 ] && exit 0

# detect_leaks stays on (LSan): tools/lsan.supp names only leaks inside OpenMPI, its plugins
# and LLVM OpenMP's tool library, which the program cannot free. Those need whole stacks
# (fast_unwind_on_malloc=0: frame-pointer unwinding stops at the first library built without
# them) and plugins that stay loaded; the slow unwinder costs time on every malloc, so only the
# MPI tests (every ensemblefit run calls MPI_Init) use it. halt_on_error: the first ASan or UBSan
# report ends the process with a non-zero status, so the test fails.
asan="detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=0:strict_string_checks=1:check_initialization_order=1"
# For the MPI tests, use_tls=0: in the program, clang 14's LSan reads glibc 2.36's dynamic-TLS
# table wrongly and crashes ("Tracer caught signal 11" on every `ensemblefit --version`: the DTLS
# range it logs is bogus), so thread-local storage is not scanned there and HDF5's per-thread
# state then looks leaked (tools/lsan.supp). The unit tests keep use_tls=1 (no crash there; with
# 0, glibc's own thread-local buffers would be reported).
lsan="suppressions=$PWD/tools/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$PWD/tools/ubsan.supp"
# OpenMPI's memory patcher hooks munmap/brk underneath ASan's interceptors; the TCP/shared-memory
# transports do not need it.
export OMPI_MCA_memory=^patcher OMPI_MCA_mca_base_component_disable_dlclose=1
export PMIX_MCA_mca_base_component_disable_dlclose=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
status=0
run_ctest() {  # run_ctest ASAN_EXTRA LSAN_EXTRA CTEST_ARGS...
    local extra=$1 lsan_extra=$2; shift 2
    say "ctest $* (ASan + UBSan)"
    ASAN_OPTIONS="$asan$extra" LSAN_OPTIONS="$lsan$lsan_extra" ctest --test-dir build-asan --output-on-failure --timeout 1800 "$@" || status=$?
}
# mpi.install and mpi.plugin build an uninstrumented consumer (a program, a model plugin)
# against the installed library, which cannot link against an ASan-built ef_core: they run in
# the normal suite only. mpi.recon_defaults (four 100-iteration reconstructions, ~200 s
# uninstrumented) measures convergence, not memory use, and runs code mpi.recon covers.
mpi_out="mpi.install|mpi.plugin|mpi.recon_defaults"
# --ci (.ci/run): the MPI tests that find things under the sanitizers, few enough to keep CI
# within its 40 minutes (each costs one to a few minutes instrumented). They run the code that
# takes input from outside or lives through failures, where memory errors hide and the unit
# tests reach least: the INI, CSV, formula and HDF5 parsers on bad and hostile input (errors),
# reading back finished, partial (killed) and merged result files (results), the results
# writer's thread with slow writes and a kill (writer), kill -9 then --resume, and shards
# merged (decomposition), collective failure and abort paths (failure: a file missing on one
# rank, a rank stopped by SIGSTOP, the heartbeat), and a graceful stop with reconstruction
# checkpoints and their resume (stop), and the hostile cases of issue 39 that read what others
# wrote or refuse what would destroy a file (result_checks: tampered result files; output_guard:
# every command's outputs, full disks; refusals: sizes that hung). The others stay in the uninstrumented suite of every CI
# run (and in a plain `tools/sanitize.sh`): numerical end-to-end runs (dis_*, recon, multislice,
# recon_stream, correlated, formula_jit, sched, advise, trace) whose kernels and set-up the unit
# tests run under the sanitizers, and runs whose paths the chosen ones share (runs: --resume;
# output_safety: output creation and locks, mostly sleeping; placement, provenance).
ci_mpi="errors|results|writer|decomposition|failure|stop|result_checks|output_guard|refusals"
if [ ${#ctest_args[@]} -eq 0 ]; then
    t=$SECONDS
    run_ctest "" "" -L unit
    stage_done "sanitizer unit tests" $t
    t=$SECONDS
    if [ $ci = 1 ]; then
        run_ctest ":fast_unwind_on_malloc=0" ":use_tls=0" -L mpi -R "^mpi\.($ci_mpi)\$"
    else
        run_ctest ":fast_unwind_on_malloc=0" ":use_tls=0" -L mpi -E "$mpi_out"
    fi
    stage_done "sanitizer MPI tests" $t
    if [ $fuzz = 1 ]; then
        t=$SECONDS
        say "fuzzers: ${seconds} s each"
        run_ctest "" "" -L fuzz
        stage_done "fuzzers" $t
    fi
else
    t=$SECONDS
    run_ctest ":fast_unwind_on_malloc=0" ":use_tls=0" "${ctest_args[@]}"
    stage_done "sanitizer tests" $t
fi
say "$((SECONDS - t0)) s in all"
exit $status
