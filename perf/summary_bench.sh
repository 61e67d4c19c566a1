#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Rank 0's summary statistics before and after a change (issue #35): builds perf/summary_bench.cpp
# against src/core/ensemble_summary.cpp of the working tree and of revision BEFORE, then runs the
# two alternated (before, after, before, ...) ROUNDS times at each thread count, on the same rows.
# Prints the programs' JSON lines, each with "build": "before" or "after".
#   perf/summary_bench.sh [BEFORE=2cbbcd1] [THREADS="1 2"] [ROWS=10000000] [P=5] [ROUNDS=3]
# (2cbbcd1: the last revision with one chain per mean/covariance value.)
# SUMMARY_BENCH_KEEP=DIR: build DIR/summary_bench_before and DIR/summary_bench_after, statically
# linked (they run on a machine without a compiler, e.g. from .gpu-run/bin), and run nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/.." && pwd)
before=${1:-2cbbcd1}
threads=${2:-1 2}
rows=${3:-10000000}
P=${4:-5}
rounds=${5:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(-O3 -DNDEBUG -std=c++20 -fopenmp -ffp-contract=off)  # a Release build's, as CMakeLists.txt
mkdir -p "$work/old/include/ensemblefit/core" "$work/old/src"
git -C "$src" show "$before:include/ensemblefit/core/ensemble_summary.hpp" > "$work/old/include/ensemblefit/core/ensemble_summary.hpp"
git -C "$src" show "$before:src/core/ensemble_summary.cpp" > "$work/old/src/ensemble_summary.cpp"
keep=${SUMMARY_BENCH_KEEP:-}
[ -n "$keep" ] && flags+=(-static)
g++ "${flags[@]}" -I"$work/old/include" "$here/summary_bench.cpp" "$work/old/src/ensemble_summary.cpp" -o "$work/before" 2>&1 |
    grep -v "dlopen\|gomp_target_init" >&2 || true
g++ "${flags[@]}" -I"$src/include" "$here/summary_bench.cpp" "$src/src/core/ensemble_summary.cpp" -o "$work/after" 2>&1 |
    grep -v "dlopen\|gomp_target_init" >&2 || true
if [ -n "$keep" ]; then
    mkdir -p "$keep"
    cp "$work/before" "$keep/summary_bench_before"
    cp "$work/after" "$keep/summary_bench_after"
    echo "built $keep/summary_bench_before ($before) and $keep/summary_bench_after (working tree)"
    exit 0
fi
for round in $(seq "$rounds"); do
    for t in $threads; do
        for build in before after; do
            OMP_NUM_THREADS=$t "$work/$build" "$rows" "$P" 1 | sed "s/^{/{\"build\": \"$build\", \"round\": $round, /"
        done
    done
done
