#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# compute-sanitizer over the GPU tests and a small GPU fit and reconstruction (issue 20): memcheck
# (out-of-bounds and misaligned device accesses, device-side leaks, CUDA API errors), racecheck
# (shared-memory hazards), and synccheck and initcheck (invalid __syncthreads use; device reads
# of memory never written). Two steps, like perf/recon/gpu_run.sh:
#
#   tools/gpu/sanitize_gpu.sh prepare    # here (build machine, no GPU): build for sm_90 with
#                                       # -lineinfo (reports name file:line), bundle the runtime
#   tools/gpu/sanitize_gpu.sh run        # there, from the repository root, with .gpu-run carried
#
# compute-sanitizer is not carried: it needs its own libraries (compute-sanitizer/ beside it,
# about 100 MB, and driver-matched), and the GPU machine's CUDA image has it (KINDS.md: it found
# planted errors on the Firecracker machines; on gVisor it refuses the device, which this script
# reports as such, not as a pass). The build machine has no compute-sanitizer at all.
#
# `run` writes $OUT/sanitize_<tool>_<what>.log per run and $OUT/sanitize_summary.txt: one line per
# run, "tool what: N errors (exit E)". It exits 0 only when every run reported 0 errors and the
# programs passed. The benchmark programs (perf/gpu/bench_*) are left out (benchmark-sized;
# memcheck runs kernels 10-100x slower); SANITIZE_TESTS overrides the Catch2 selection (default:
# every gpu_tests case), SANITIZE_TOOLS the tools
# (default: memcheck racecheck synccheck initcheck). About 10-20 minutes on one H100 for all four.
set -uo pipefail
cd "${EF_REPO:-$(dirname "$0")/../..}"
BUNDLE=${EF_BUNDLE:-.gpu-run}
mode=${1:-run}

if [ "$mode" = prepare ]; then
    set -e
    # build-gpu-lineinfo, not build-gpu: -lineinfo changes nothing the program computes, but a
    # separate tree leaves gpu_run.sh's timed build alone. ccache makes a rebuild cheap.
    cmake -S . -B build-gpu-lineinfo -DCMAKE_BUILD_TYPE=Release -DENSEMBLEFIT_CUDA=ON \
          -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-lineinfo > /dev/null
    cmake --build build-gpu-lineinfo -j"$(nproc)" --target ensemblefit gpu_tests
    tools/gpu/bundle-runtime.sh "$BUNDLE" build-gpu-lineinfo/ensemblefit build-gpu-lineinfo/tests/gpu_tests
    rm -f "$BUNDLE"/usr/lib/x86_64-linux-gnu/libcufft* "$BUNDLE"/usr/lib/x86_64-linux-gnu/libcublas*
    echo "bundle: $(du -sh "$BUNDLE" | cut -f1) (cuFFT, cuBLAS left out: the GPU machine has its own)"
    echo "then, on the GPU machine: bash tools/gpu/sanitize_gpu.sh run   (carry $BUNDLE)"
    exit 0
fi
[ "$mode" = run ] || { echo "usage: $0 prepare | run" >&2; exit 2; }

OUT=${OUT:-$PWD/perf/gpu/out}
mkdir -p "$OUT"
source "$BUNDLE/env.sh"
source perf/recon/bench_config.sh
gpu_machine_env
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer 2>/dev/null | head -1 || true)
summary=$OUT/sanitize_summary.txt
: > "$summary"
if [ -z "$CS" ]; then
    echo "no compute-sanitizer on this machine (looked on PATH and in /usr/local/cuda*/bin)" | tee -a "$summary"
    exit 1
fi
{ nvidia-smi -L; "$CS" --version | tail -1; } | tee -a "$summary"
W=$(mktemp -d /tmp/ef-sanitize.XXXXXX)
SRC=$PWD
failed=0

# sanitize TOOL WHAT PROGRAM ARGS...: one run under one tool; its log and its summary line.
sanitize() {
    local tool=$1 what=$2; shift 2
    local log=$OUT/sanitize_${tool}_${what}.log extra=()
    case $tool in
        memcheck) extra=(--leak-check full --report-api-errors all) ;;
        racecheck) extra=(--racecheck-report all) ;;
        initcheck) extra=(--track-unused-memory no) ;;
    esac
    (cd "$W" && timeout "${SANITIZE_TIMEOUT:-1800}" "$CS" --tool "$tool" "${extra[@]}" \
        --error-exitcode 99 --print-limit 50 "$@") > "$log" 2>&1
    local rc=$?
    # The tool's own closing line: "========= ERROR SUMMARY: N errors" (racecheck: "RACECHECK SUMMARY").
    local errors
    errors=$(grep -E "========= (ERROR|RACECHECK) SUMMARY" "$log" | tail -1 | sed 's/^========= //')
    if grep -q -E "Device not supported|Unable to find injection library|error 999" "$log"; then
        errors="the tool could not attach to the device (gVisor machine?): NOT CHECKED"
        rc=98
    fi
    echo "$tool $what: ${errors:-no summary line} (exit $rc)" | tee -a "$summary"
    [ $rc -eq 0 ] || failed=1
}

# A small GPU fit (the README's example, 64 replicas) and a small reconstruction, so that the
# program's own paths (worker set-up, unit loop, output) run under the tools too.
cp "$SRC/inputs/example.ini" "$SRC/inputs/decay.csv" "$W/"
ensemblefit simulate ptycho --out "$W/small.h5" --scan 8 --dp 32 --modes 2 --dose 1e6 --seed 3 > /dev/null
cat > "$W/small.ini" <<'INI'
[data]
file = small.h5
[model]
modes = 2
[solver]
iterations = 2
batch_size = 16
seed = 11
[run]
workers = gpu
[output]
previews = false
INI
tests=${SANITIZE_TESTS:-"*"}
for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
    sanitize "$tool" gpu_tests "$(command -v gpu_tests)" "$tests"
    sanitize "$tool" fit "$(command -v ensemblefit)" fit example.ini --fit.replicas 64 \
        --run.workers gpu --output.file "fit_$tool.h5" --overwrite
    sanitize "$tool" recon "$(command -v ensemblefit)" reconstruct small.ini \
        --output.file "recon_$tool.h5" --overwrite
done
rm -rf "$W"
echo "result: $([ $failed = 0 ] && echo "no errors in any run" || echo "errors or failures: see the logs")" | tee -a "$summary"
exit $failed
