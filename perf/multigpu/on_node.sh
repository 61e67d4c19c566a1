#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One device call on the GPU node: unpack the bundle (carried as .gpu-run.tar.xz when the
# unpacked .gpu-run is over the carry limit), run the GPU tests named by GPU_TESTS (a Catch2
# filter; empty: none) under a time guard, then perf/multigpu/issue35.sh with SECTIONS.
#   GPU_TESTS='[gpu]~[nist]' SECTIONS="stats2 spot" bash perf/multigpu/on_node.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
[ -d .gpu-run ] || tar -xJf .gpu-run.tar.xz || exit 2
OUT=${OUT:-$PWD/perf/multigpu/out35}
mkdir -p "$OUT"
nvidia-smi -L | tee "$OUT/gpus.txt"
nproc >> "$OUT/gpus.txt"
if [ -n "${GPU_TESTS:-}" ]; then
    (source .gpu-run/env.sh && source perf/recon/bench_config.sh && gpu_machine_env &&
     timeout "${GPU_TESTS_S:-150}" .gpu-run/bin/gpu_tests "$GPU_TESTS" > "$OUT/gpu_tests.log" 2>&1
     echo "gpu_tests exit $?" >> "$OUT/gpu_tests.log")
    tail -n 4 "$OUT/gpu_tests.log"
fi
[ -n "${SECTIONS:-}" ] && OUT=$OUT bash perf/multigpu/issue35.sh
