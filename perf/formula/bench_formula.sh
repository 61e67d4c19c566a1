#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue #23's CPU goals on one core, all in one run: inputs/spot.ini (the 15x15 spot as a
# formula) compiled at run time (compile = jit), interpreted, and as the built-in gaussian2d, on
# the qr, normal and float solvers; and gaussian2d normal float against the peer
# perf/peers/lm_gauss2d.cpp (a minimal Cpufit-like LM, built here with the same compiler, with
# libm's expf and with ef::math's exp_float).
#
#   perf/formula/bench_formula.sh BUILD_DIR [REPLICAS=20000]
#
# Throughput is replicas per CPU-second of the whole process (user + sys from /usr/bin/time,
# start-up included), one thread: on a shared machine CPU time is steadier than wall time, but a
# busy machine still slows every run alike (caches, frequency). The load average is recorded.
# Output: a table on stdout and perf/formula/results/<host>-<date>.json.
set -euo pipefail
BUILD=$(cd "${1:?usage: bench_formula.sh BUILD_DIR [REPLICAS]}" && pwd)
R=${2:-20000}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
EF=$BUILD/ensemblefit
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ef-bench-formula.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
cp "$SRC/inputs/spot.ini" "$SRC/inputs/spot.csv" .
export OMP_NUM_THREADS=1 XDG_CACHE_HOME="$WORK/cache"
CXX=${CXX:-c++}
$CXX -O3 -std=c++20 -ffp-contract=off -o peer "$SRC/perf/peers/lm_gauss2d.cpp"
$CXX -O3 -std=c++20 -ffp-contract=off -DPEER_EF_EXP -I"$SRC" -o peer_ef "$SRC/perf/peers/lm_gauss2d.cpp"

rows=()
# run NAME ARGS...: one ensemblefit run of R replicas; prints and records fits per CPU-second.
run() {
    local name=$1; shift
    rm -f out.h5
    /usr/bin/time -f "%U %S" -o cpu.txt "$EF" fit spot.ini --fit.replicas "$R" --run.threads 1 \
        --output.file out.h5 "$@" > /dev/null 2> run.err || { cat run.err >&2; exit 1; }
    local cpu its
    cpu=$(awk '{print $1 + $2}' cpu.txt)
    its=$(/usr/bin/python3 -c "import h5py; print(round(float(h5py.File('out.h5')['replicas/iterations'][()].mean()), 3))")
    printf "%-34s %8.2f CPU s %10.0f fits/CPU-s  %6.3f iterations\n" "$name" "$cpu" "$(echo "$R / $cpu" | bc -l)" "$its"
    rows+=("{\"run\": \"$name\", \"cpu_s\": $cpu, \"replicas\": $R, \"mean_iterations\": $its}")
}
"$EF" fit spot.ini --fit.replicas 1 --model.compile jit --output.file warm.h5 > /dev/null  # compile once
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for solver in qr normal float; do
    case $solver in
        qr) args=(--fit.solver qr) ;;
        normal) args=(--fit.solver normal) ;;
        float) args=(--fit.precision float) ;;
    esac
    run "formula jit, $solver" "${args[@]}" --model.compile jit
    run "gaussian2d, $solver" "${args[@]}" --model.name gaussian2d
    run "formula interpret, $solver" "${args[@]}" --model.compile interpret
done
run "gaussian2d, float, ftol 1e-4" --fit.precision float --model.name gaussian2d --fit.ftol 1e-4
for p in peer peer_ef; do
    line=$(./$p spot.csv "$R" 1e-4)
    echo "$line"
    rows+=("$line")
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average before: $load_before, after: $load_after ($(nproc) CPUs)"
out="$SRC/perf/formula/results/$(hostname -s)-$(date -u +%Y%m%dT%H%MZ).json"
{
    echo "{\"host\": \"$(hostname -s)\", \"cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)\","
    echo " \"date\": \"$(date -u +%FT%TZ)\", \"commit\": \"$(git -C "$SRC" describe --always --dirty)\","
    echo " \"load_before\": \"$load_before\", \"load_after\": \"$load_after\", \"runs\": ["
    (IFS=,; echo "  ${rows[*]}")
    echo "]}"
} > "$out"
echo "wrote $out"
