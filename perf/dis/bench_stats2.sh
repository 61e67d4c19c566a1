#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# First CPU benchmark of inputs/stats2.ini (issue #3): the C++ CPU worker (1 thread, 2 threads,
# 2 ranks x 1 thread) and the numpy peer (perf/peers/dis_numpy.py, Debian's /usr/bin/python3)
# on the same replicas 0..R, in one run. Prints replicas/s/core, counted FLOPs per replica LM
# iteration (from --dry-run), mean iterations and achieved GFLOP/s (= counted FLOPs of all
# iterations / compute seconds), the agreement of the numpy fits with the C++ fits, and writes
# the raw numbers to perf/dis/results/<machine>-<date>.json.
#
# usage: perf/dis/bench_stats2.sh [REPLICAS (default 64)] [--build]
#   BIN=path/to/ensemblefit overrides build/ensemblefit; WORK=dir keeps the run's files there.
#
# GPU mode (issue #27), on the GPU machine from the repository root with the .gpu-run bundle
# (perf/recon/gpu_run.sh prepare makes it: ensemblefit and gpu_tests for sm_90):
#   bash perf/dis/bench_stats2.sh --gpu [REPLICAS (default 2560)]
# runs, each step on its own (a failing step is reported and the others still run), logs and
# summary.json under $OUT (default perf/dis/out): `ensemblefit devices` (the FP64 FMA peak and the
# table GEMM at the stats2 shape against cuBLAS), the GPU tests of the batched paths, stats2 on
# one GPU with the Gram path (solver = normal, the default for stats2) and the QR table path, each
# with the round loop on the device and on the host ([tuning] gpu_round_loop), EF_GPU_STATS on,
# and the PyTorch peer (perf/peers/dis_torch.py) on the same GPU, same tables and replicas. It
# prints fits/s over the fitting and for the whole process, the peer's, launches and host syncs
# per unit, the GEMM's TFLOP/s and its fraction of the peak, and whether device and host loops
# gave the same bits. SKIP_TESTS=1 skips the tests; SOLVERS="normal qr" and LOOPS="device host"
# choose the runs.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if [ "${1:-}" = --gpu ]; then
    shift
    exec bash "$root/perf/dis/bench_stats2_gpu.sh" "$@"
fi
R=64
build=0
for a in "$@"; do
    case "$a" in
        --build) build=1 ;;
        ''|*[!0-9]*) echo "usage: $0 [REPLICAS] [--build]" >&2; exit 2 ;;
        *) R=$a ;;
    esac
done
BIN=${BIN:-$root/build/ensemblefit}
PY=/usr/bin/python3   # Debian's python3-numpy/scipy/h5py, not the python3 first on PATH
CONFIG=inputs/stats2.ini
[ "$build" = 1 ] && cmake --build "$root/build" -j2 --target ensemblefit
[ -x "$BIN" ] || { echo "no $BIN (build first, or pass --build)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One BLAS thread for the peer (Debian's reference BLAS is single-threaded anyway).
export OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
WORK=${WORK:-$(mktemp -d /tmp/dis-bench.XXXXXX)}
mkdir -p "$WORK" perf/dis/results
model=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
cores=$(nproc --all)
slug=$(echo "$model" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | sed 's/-$//')-${cores}core
day=$(date +%F)
out=perf/dis/results/$slug-$day.json
k=2; while [ -e "$out" ]; do out=perf/dis/results/$slug-$day-$k.json; k=$((k + 1)); done  # keep earlier runs
echo "dis-mellin stats2 benchmark: $model, $cores cores, $day; replicas 0..$R; files in $WORK"

# Run a command, recording wall/user/sys seconds and the load average before and after.
runlog() {  # name, command...
    local name=$1; shift
    local l0; l0=$(cut -d' ' -f1-3 /proc/loadavg)
    /usr/bin/time -f '%e %U %S' -o "$WORK/$name.time" "$@" > "$WORK/$name.log" 2>&1 || {
        echo "FAILED: $*" >&2; tail -20 "$WORK/$name.log" >&2; exit 1; }
    echo "$l0 | $(cut -d' ' -f1-3 /proc/loadavg)" > "$WORK/$name.load"
    echo "  $name: $(cat "$WORK/$name.time") (wall user sys s), load $(cat "$WORK/$name.load")"
}

"$BIN" fit "$CONFIG" --dry-run > "$WORK/dryrun.txt" 2>&1
grep 'cost:' "$WORK/dryrun.txt"
runlog export "$BIN" export dis-table "$CONFIG" --out "$WORK/table.h5" --replicas "$R" --overwrite
fit=("$BIN" fit "$CONFIG" --fit.replicas "$R" --overwrite)
# The single-core pair first, back to back, so that both see the same machine.
runlog cpp_1thread "${fit[@]}" --output.file "$WORK/cpp_1thread.h5" --run.threads 1
runlog numpy "$PY" perf/peers/dis_numpy.py "$WORK/table.h5" --compare "$WORK/cpp_1thread.h5" \
    --json "$WORK/numpy.json"
runlog cpp_2threads "${fit[@]}" --output.file "$WORK/cpp_2threads.h5" --run.threads 2
runlog cpp_2ranks mpirun --oversubscribe -np 2 "${fit[@]}" --output.file "$WORK/cpp_2ranks.h5" --run.threads 1

"$PY" - "$WORK" "$R" "$model" "$cores" "$day" "$out" "$0 $*" <<'EOF'
import json, re, subprocess, sys
import h5py, numpy as np

work, R, model, cores, day, out, cmd = sys.argv[1:]
R, cores = int(R), int(cores)
dry = open(f"{work}/dryrun.txt").read()
m = re.search(r"cost:\s+(\S+) FLOP per data point, (\S+) per model evaluation, (\S+) per replica LM iteration", dry)
flops = {"per_point": float(m[1]), "per_model_evaluation": float(m[2]), "per_replica_iteration": float(m[3])}
fpi = flops["per_replica_iteration"]

def timing(name):
    wall, user, sys_ = (float(v) for v in open(f"{work}/{name}.time").read().split())
    return {"wall_s": wall, "user_s": user, "sys_s": sys_, "loadavg_before_after": open(f"{work}/{name}.load").read().strip()}

def cpp(name, ranks, threads):
    with h5py.File(f"{work}/{name}.h5", "r") as f:
        it = np.concatenate([f["/central/iterations"][...], f["/replicas/iterations"][...]])
        st = np.concatenate([f["/central/status"][...], f["/replicas/status"][...]])
        comp = f["/timing/compute"][...]
        params = np.vstack([f["/central/params"][...][None], f["/replicas/params"][...]])
    t = max(float(c) for c in comp)  # compute phase, slowest rank
    n = it.size
    c = ranks * threads
    d = {"ranks": ranks, "threads": threads, "cores": c, "replicas_fitted": n,
         "compute_seconds_per_rank": [float(x) for x in comp], "compute_seconds": t,
         "replicas_per_second": n / t, "replicas_per_second_per_core": n / t / c,
         "iterations_total": int(it.sum()), "iterations_mean": float(it.mean()),
         "status_counts": {str(s): int((st == s).sum()) for s in np.unique(st)},
         "gflops": fpi * it.sum() / t / 1e9, "gflops_per_core": fpi * it.sum() / t / 1e9 / c}
    d.update(timing(name))
    d["cpu_seconds_per_replica"] = (d["user_s"] + d["sys_s"]) / n
    return d, params

runs, P = {}, {}
for name, ranks, threads in (("cpp_1thread", 1, 1), ("cpp_2threads", 1, 2), ("cpp_2ranks", 2, 1)):
    runs[name], P[name] = cpp(name, ranks, threads)
np_ = json.load(open(f"{work}/numpy.json"))
np_["cores"] = 1
np_["replicas_per_second_per_core"] = np_["replicas_per_second"]
np_["gflops"] = np_["gflops_counted"]
np_["gflops_per_core"] = np_["gflops_counted"]
np_.update(timing("numpy"))
np_["cpu_seconds_per_replica"] = (np_["user_s"] + np_["sys_s"]) / np_["replicas_fitted"]
runs["numpy"] = np_
same = all(np.array_equal(P["cpp_1thread"], P[k]) for k in ("cpp_2threads", "cpp_2ranks"))
git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
res = {"benchmark": "inputs/stats2.ini, replicas 0..%d" % R, "device": {"cpu": model, "cores": cores},
       "date": day, "command": cmd.strip(), "git_head": git, "flops_counted": flops, "runs": runs,
       "cpp_bitwise_identical_across_1thread_2threads_2ranks": same,
       "numpy_vs_cpp": np_.get("comparison")}
json.dump(res, open(out, "w"), indent=2)

print()
print(f"counted FLOPs: {flops['per_point']:.0f} per point, {flops['per_model_evaluation']:.4g} per model "
      f"evaluation, {fpi:.4g} per replica LM iteration (dual Jacobian + trial + QR)")
hdr = f"{'run':14s} {'cores':>5s} {'compute s':>9s} {'rep/s':>7s} {'rep/s/core':>10s} {'mean it':>7s} " \
      f"{'GFLOP/s':>7s} {'GF/s/core':>9s} {'cpu s/rep':>9s}  load before | after"
print(hdr)
for k, d in runs.items():
    print(f"{k:14s} {d['cores']:5d} {d['compute_seconds']:9.2f} {d['replicas_per_second']:7.3f} "
          f"{d['replicas_per_second_per_core']:10.3f} {d['iterations_mean']:7.2f} {d['gflops']:7.2f} "
          f"{d['gflops_per_core']:9.2f} {d['cpu_seconds_per_replica']:9.3f}  {d['loadavg_before_after']}")
c = np_.get("comparison") or {}
print(f"C++ params bitwise identical across 1 thread / 2 threads / 2 ranks: {same}")
print(f"numpy vs C++ (1 thread), {c.get('replicas_compared')} replicas: max rel diff {c.get('max_rel_diff_params'):.3g} "
      f"(worst {c.get('worst')}), max |diff| {c.get('max_abs_diff_params'):.3g} = "
      f"{c.get('max_diff_in_units_of_central_fit_error'):.3g} x the central fit's error; agree to 1e-6 rel: "
      f"{c.get('replicas_agree_1e-6')}, 1e-5: {c.get('replicas_agree_1e-5')}; chi2 max rel diff "
      f"{c.get('max_rel_diff_chi2'):.3g}; same iterations {c.get('same_iterations')} "
      f"(diff {c.get('iteration_diff_min_max')}); same status {c.get('same_status')}")
print(f"numpy stop reasons: {np_.get('stop_reasons')}; GEMM-only GFLOP/s of the peer's own work: "
      f"{np_['gemm_gflops']:.2f}")
print(f"raw: {out}")
EOF
