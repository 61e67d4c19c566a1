#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The dis-mellin benchmarks, one subcommand each (notes and options above each one's function):
#   bash perf/dis.sh stats2 --gpu [REPLICAS]        stats2 on one GPU against the PyTorch peer
#   perf/dis.sh solver [REPLICAS]                   the CPU's Gram and QR paths against the numpy peer
#   perf/dis.sh nlo [--gpu] [REPLICAS]              NLO against LO fit time, and the split sea
#   perf/dis.sh coverage BUILD_DIR [DATASETS] ...   the central errors' coverage of the truth

# ---- stats2
# stats2 (inputs/stats2.ini) on one GPU against the PyTorch peer (issue #27), on the GPU machine
# from the repository root with the .gpu-run bundle (perf/recon/gpu_run.sh prepare makes it):
#   bash perf/dis.sh stats2 --gpu [REPLICAS (default 2560)]
# Each step runs whatever the previous ones did; logs, the peer's JSON and summary.json go to
# $OUT (default perf/out/dis): `ensemblefit devices` (the FP64 FMA peak and the table GEMM at the
# stats2 shape against cuBLAS), the GPU tests of the batched paths, stats2 with the Gram path
# (solver = normal) and the QR table path, each with the round loop on the device and on the
# host ([tuning] gpu_round_loop), EF_GPU_STATS on, and the PyTorch peer (perf/peers/dis_torch.py)
# on the same GPU, tables and replicas. Prints fits/s over the fitting and the whole process,
# the peer's, launches and host syncs per unit, the GEMM's TFLOP/s and its fraction of the peak,
# and whether device and host loops gave the same bits. SKIP_TESTS=1 skips the tests;
# SOLVERS="normal qr" and LOOPS="device host" choose the runs. (The CPU mode against the numpy
# peer, issue #3, was superseded by `perf/dis.sh solver`: `git show a5ec5f7:perf/dis/bench_stats2.sh`.)
cmd_stats2() (
set -uo pipefail
cd "$(dirname "$0")/.."
[ "${1:-}" = --gpu ] && shift
R=${1:-2560}
case "$R" in ''|*[!0-9]*) echo "usage: $0 stats2 --gpu [REPLICAS]" >&2; exit 2 ;; esac
OUT=${OUT:-$PWD/perf/out/dis}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-stats2.XXXXXX)
ORIG_LD=${LD_LIBRARY_PATH:-}
py() { LD_LIBRARY_PATH="$ORIG_LD" python3 "$@"; }  # the machine's Python (PyTorch, h5py)
if [ -f .gpu-run/env.sh ]; then
    source .gpu-run/env.sh
else
    echo "!! no .gpu-run/env.sh: using ensemblefit and gpu_tests from PATH" >&2
fi
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/cuda/lib64 EF_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
SOLVERS=${SOLVERS:-normal qr}
LOOPS=${LOOPS:-device host}
step() { echo; echo "== $* ($(date +%T))"; }
# name, command...: output into $OUT/name.log, wall seconds into $W/name.time; never stops the script.
timed() {
    local name=$1; shift
    local t0; t0=$(date +%s.%N)
    "$@" > "$OUT/$name.log" 2>&1
    local rc=$?
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f\n", b - a }' > "$W/$name.time"
    echo "$rc" > "$W/$name.rc"
    echo "   [$name: rc $rc, $(cat "$W/$name.time") s wall, log $OUT/$name.log]"
    [ $rc -eq 0 ] || { echo "!! $name failed (exit $rc):"; tail -5 "$OUT/$name.log"; }
    return 0
}
{
step "devices"
timed devices ensemblefit devices
cat "$OUT/devices.log"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
if [ "${SKIP_TESTS:-0}" != 1 ]; then
    step "GPU tests of the batched paths (bit for bit against the CPU; device loop = host loop)"
    timed gpu_tests gpu_tests "[dis-mellin],[roundloop],[gemm]"
    tail -4 "$OUT/gpu_tests.log"
fi
step "export the stats2 tables and replicas 0..$R for the peer"
timed export ensemblefit export dis-table inputs/stats2.ini --out "$W/table.h5" --replicas "$R" --overwrite
for s in $SOLVERS; do
    for l in $LOOPS; do
        step "ensemblefit, 1 GPU, solver $s, round loop on the $l"
        EF_GPU_STATS=1 timed "gpu_${s}_$l" ensemblefit fit inputs/stats2.ini --fit.replicas "$R" --overwrite \
            --fit.solver "$s" --tuning.gpu_round_loop "$l" --run.workers gpu --output.file "$W/gpu_${s}_$l.h5"
        grep "^\\[gpu" "$OUT/gpu_${s}_$l.log"
    done
done
step "PyTorch peer, same GPU, same tables and replicas"
first=${SOLVERS%% *}
first_loop=${LOOPS%% *}
timed torch py perf/peers/dis_torch.py "$W/table.h5" --device cuda --json "$OUT/torch.json" \
    --compare "$W/gpu_${first}_$first_loop.h5"
step "summary"
py - "$W" "$OUT" "$R" "$SOLVERS" "$LOOPS" <<'PY'
import json, os, re, sys
w, out, R, solvers, loops = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(), sys.argv[5].split()
res = {"replicas": R + 1, "runs": {}}
try:
    import h5py, numpy as np
except ImportError as e:
    h5py = None
    res["error"] = f"no h5py/numpy: {e}"
dev = open(f"{out}/devices.log").read() if os.path.exists(f"{out}/devices.log") else ""
m = re.search(r"FP64 ([\d.]+) TFLOP/s.*table GEMM ([\d.]+) TFLOP/s \(cuBLAS DGEMM ([\d.]+)\)", dev)
peak = float(m[1]) if m else None
if m:
    res["devices"] = {"fp64_fma_peak_tflops": peak, "table_gemm_tflops": float(m[2]), "cublas_dgemm_tflops": float(m[3]),
                      "table_gemm_fraction_of_peak": float(m[2]) / peak}
stat = re.compile(r"\[gpu \d+\] (\d+) replicas: ([\d.]+) s, (\d+) rounds, table GEMM ([\d.]+) s at ([\d.]+) TFLOP/s, "
                  r"LM steps ([\d.]+) s, moments ([\d.]+) s, \w+ lists ([\d.]+) s; (\w+) loop: (\d+) launches, "
                  r"(\d+) host syncs, (\d+) graphs per unit; GEMM tiling (\w+)")
fits = {}
for s in solvers:
    for l in loops:
        k = f"gpu_{s}_{l}"
        if not os.path.exists(f"{w}/{k}.time"):
            continue
        r = {"rc": int(open(f"{w}/{k}.rc").read()), "wall_seconds": float(open(f"{w}/{k}.time").read())}
        units = [mm.groups() for mm in stat.finditer(open(f"{out}/{k}.log").read())]
        if units:
            g = lambda i, f=float: [f(u[i]) for u in units]
            gemm_s, gemm_tf = g(3), g(4)
            flops = sum(a * b for a, b in zip(gemm_s, gemm_tf)) * 1e12
            r["units"] = len(units)
            r["rounds_per_unit"] = g(2, int)
            r["launches_per_unit"] = g(9, int)
            r["host_syncs_per_unit"] = g(10, int)
            r["graphs_per_unit"] = g(11, int)
            r["gemm_tiling"] = units[0][12]
            r["unit_seconds"] = g(1)
            r["gemm_seconds"] = sum(gemm_s)
            r["gemm_tflops"] = flops / sum(gemm_s) / 1e12 if sum(gemm_s) > 0 else None
            if peak and r["gemm_tflops"]:
                r["gemm_fraction_of_fp64_peak"] = r["gemm_tflops"] / peak
            r["lm_step_seconds"], r["moment_seconds"], r["list_seconds"] = sum(g(5)), sum(g(6)), sum(g(7))
        if h5py and os.path.exists(f"{w}/{k}.h5") and r["rc"] == 0:
            with h5py.File(f"{w}/{k}.h5", "r") as f:
                p = np.vstack([f["/central/params"][...][None], f["/replicas/params"][...]])
                c2 = np.concatenate([f["/central/chi2"][...], f["/replicas/chi2"][...]])
                st = np.concatenate([f["/central/status"][...], f["/replicas/status"][...]])
                comp = float(max(f["/timing/compute"][...]))
            fits[k] = (p, c2, st)
            r["fits"] = int(p.shape[0])
            r["compute_seconds"] = comp
            r["fits_per_second_fitting"] = p.shape[0] / comp
            r["fits_per_second_process"] = p.shape[0] / r["wall_seconds"]
            r["status_counts"] = {str(x): int((st == x).sum()) for x in np.unique(st)}
        res["runs"][k] = r
for s in solvers:
    a, b = fits.get(f"gpu_{s}_device"), fits.get(f"gpu_{s}_host")
    if a is not None and b is not None:
        res[f"{s}_device_loop_equals_host_loop_bitwise"] = bool(
            np.array_equal(a[0], b[0], equal_nan=True) and np.array_equal(a[1], b[1], equal_nan=True)
            and np.array_equal(a[2], b[2]))
if os.path.exists(f"{out}/torch.json"):
    t = json.load(open(f"{out}/torch.json"))
    res["torch"] = {x: t.get(x) for x in ("replicas_per_second", "seconds", "wall_seconds", "rounds", "iterations_mean",
                                          "comparison", "torch", "device") if x in t}
    pr = t.get("replicas_per_second")
    for k, r in res["runs"].items():
        if pr and r.get("fits_per_second_fitting"):
            r["speedup_over_peer_fitting"] = r["fits_per_second_fitting"] / pr
            r["speedup_over_peer_process"] = r["fits_per_second_process"] / pr
json.dump(res, open(f"{out}/summary.json", "w"), indent=1)
print(json.dumps(res, indent=1))
print()
print(f"{'run':22s} {'fits/s fit':>10s} {'fits/s proc':>11s} {'x peer':>7s} {'launch/unit':>12s} {'syncs/unit':>11s} "
      f"{'GEMM TF/s':>9s} {'of peak':>7s}")
for k, r in res["runs"].items():
    f = lambda x, fmt: format(r[x], fmt) if r.get(x) is not None else format("-", ">" + fmt.split(".")[0])
    print(f"{k:22s} {f('fits_per_second_fitting', '10.1f')} {f('fits_per_second_process', '11.1f')} "
          f"{f('speedup_over_peer_fitting', '7.2f')} {str(r.get('launches_per_unit', '-')):>12s} "
          f"{str(r.get('host_syncs_per_unit', '-')):>11s} {f('gemm_tflops', '9.2f')} "
          f"{f('gemm_fraction_of_fp64_peak', '7.2f')}")
if "devices" in res:
    d = res["devices"]
    print(f"probe: FP64 FMA peak {d['fp64_fma_peak_tflops']} TFLOP/s, table GEMM {d['table_gemm_tflops']} "
          f"({d['table_gemm_fraction_of_peak']:.2f} of peak), cuBLAS DGEMM {d['cublas_dgemm_tflops']}")
PY
} 2>&1 | tee "$OUT/bench.log"
rm -rf "$W"
)

# ---- solver
# Which solver should dis-mellin use by default (issue #27)? inputs/stats2.ini on the CPU, one
# thread: the QR path (`--fit.solver qr`, the table LM), the Gram path (`--fit.solver normal`)
# and the numpy peer (perf/peers/dis_numpy.py, the same replicas 0..R), each run twice,
# interleaved, in one run. Prints fits per core-second: per CPU-second of the
# fitting (the process's user + sys less a --dry-run's, which builds the same tables; the peer's
# own fit loop's process time), the measure that survives a loaded machine, and per wall second
# of the compute phase of /timing (the peer's fit loop); and the agreement of the Gram fits with the QR fits in
# units of the fit errors (sqrt of /central/covariance's diagonal, QR), and writes the raw
# numbers to perf/out/solver-<machine>-<date>.json.
#
# usage: perf/dis.sh solver [REPLICAS (default 32)]
#   BIN=path/to/ensemblefit overrides build/ensemblefit; WORK=dir keeps the run's files there;
#   ANALYSE=1 only analyses the files of an earlier run in WORK.
cmd_solver() (
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
R=${1:-32}
case "$R" in ''|*[!0-9]*) echo "usage: $0 solver [REPLICAS]" >&2; exit 2 ;; esac
BIN=${BIN:-$root/build/ensemblefit}
PY=/usr/bin/python3   # Debian's python3-numpy/scipy/h5py, not the python3 first on PATH
CONFIG=inputs/stats2.ini
[ -x "$BIN" ] || { echo "no $BIN (build first)" >&2; exit 2; }
export OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 OMP_NUM_THREADS=1
WORK=${WORK:-$(mktemp -d /tmp/dis-solver.XXXXXX)}
mkdir -p "$WORK" perf/out
model=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
slug=$(echo "$model" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | sed 's/-$//')-$(nproc --all)core
day=$(date +%F)
out=perf/out/solver-$slug-$day.json
k=2; while [ -e "$out" ]; do out=perf/out/solver-$slug-$day-$k.json; k=$((k + 1)); done
echo "dis-mellin solver benchmark: $model, $day; replicas 0..$R, 1 thread; files in $WORK"

runlog() {  # name, command...: wall/user/sys seconds and the load average before | after
    local name=$1; shift
    local l0; l0=$(cut -d' ' -f1-3 /proc/loadavg)
    /usr/bin/time -f '%e %U %S' -o "$WORK/$name.time" "$@" > "$WORK/$name.log" 2>&1 || {
        echo "FAILED: $*" >&2; tail -20 "$WORK/$name.log" >&2; exit 1; }
    echo "$l0 | $(cut -d' ' -f1-3 /proc/loadavg)" > "$WORK/$name.load"
    echo "  $name: $(cat "$WORK/$name.time") (wall user sys s), load $(cat "$WORK/$name.load")"
}

fit=("$BIN" fit "$CONFIG" --fit.replicas "$R" --overwrite --run.threads 1)
[ -n "${ANALYSE:-}" ] || "$BIN" export dis-table "$CONFIG" --out "$WORK/table.h5" --replicas "$R" --overwrite > /dev/null
[ -n "${ANALYSE:-}" ] || for rep in 1 2; do
    runlog qr$rep "${fit[@]}" --fit.solver qr --output.file "$WORK/qr$rep.h5"
    runlog gram$rep "${fit[@]}" --fit.solver normal --output.file "$WORK/gram$rep.h5"
    runlog numpy$rep "$PY" perf/peers/dis_numpy.py "$WORK/table.h5" --json "$WORK/numpy$rep.json"
done
# Set-up's CPU time (data, model tables, worker): a dry run does all of it and fits nothing.
for s in qr normal; do
    [ -e "$WORK/dry_$s.time" ] || runlog dry_$s "${fit[@]}" --fit.solver $s --output.file "$WORK/dry.h5" --dry-run
done

"$PY" - "$WORK" "$R" "$model" "$day" "$out" "$0 solver $*" <<'EOF'
import json, subprocess, sys
import h5py, numpy as np

work, R, model, day, out, cmd = sys.argv[1:]

def load(name):
    with h5py.File(f"{work}/{name}.h5", "r") as f:
        p = np.vstack([f["/central/params"][...][None], f["/replicas/params"][...]])
        st = np.concatenate([f["/central/status"][...], f["/replicas/status"][...]])
        it = np.concatenate([f["/central/iterations"][...], f["/replicas/iterations"][...]])
        cov = f["/central/covariance"][...]
        std = f["/summary/std"][...]
        comp = float(max(f["/timing/compute"][...]))
    return {"params": p, "status": st, "iterations": it, "err": np.sqrt(np.maximum(np.diag(cov), 0)),
            "std": std, "compute_seconds": comp}

def rate(d):
    return d["params"].shape[0] / d["compute_seconds"]

def cpu(name):
    return sum(float(v) for v in open(f"{work}/{name}.time").read().split()[1:])

def cpu_rate(name, dry):
    return (int(R) + 1) / (cpu(name) - cpu(dry))

runs = {k: load(k) for k in ("qr1", "qr2", "gram1", "gram2")}
npy = {k: json.load(open(f"{work}/{k}.json")) for k in ("numpy1", "numpy2")}
best = {"qr": max(rate(runs["qr1"]), rate(runs["qr2"])), "gram": max(rate(runs["gram1"]), rate(runs["gram2"])),
        "numpy": max(v["replicas_per_second"] for v in npy.values()),
        "numpy_cpu": max(v["replicas_fitted"] / v["cpu_seconds"] for v in npy.values()),
        "qr_cpu": max(cpu_rate(k, "dry_qr") for k in ("qr1", "qr2")),
        "gram_cpu": max(cpu_rate(k, "dry_normal") for k in ("gram1", "gram2"))}
qr, gr = runs["qr1"], runs["gram1"]
free = qr["err"] > 0
d = np.abs(gr["params"] - qr["params"])[:, free] / qr["err"][free]
agree = {
    "replicas": int(qr["params"].shape[0]),
    "max_param_diff_in_fit_errors": float(d.max()),
    "median_param_diff_in_fit_errors": float(np.median(d)),
    "max_rel_diff_fit_errors": float(np.max(np.abs(gr["err"][free] / qr["err"][free] - 1))),
    "max_rel_diff_ensemble_std": float(np.max(np.abs(gr["std"][free] / qr["std"][free] - 1))),
    "same_status": bool(np.array_equal(gr["status"], qr["status"])),
    "iterations_mean_qr_gram": [float(qr["iterations"].mean()), float(gr["iterations"].mean())],
}
git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
res = {"benchmark": f"inputs/stats2.ini, replicas 0..{R}, 1 thread", "cpu": model, "date": day, "command": cmd.strip(),
       "git_head": git,
       "fits_per_second_per_core": best,
       "speedup_vs_numpy": {"qr": best["qr"] / best["numpy"], "gram": best["gram"] / best["numpy"]},
       "speedup_vs_numpy_cpu_seconds": {"qr": best["qr_cpu"] / best["numpy_cpu"], "gram": best["gram_cpu"] / best["numpy_cpu"]},
       "setup_cpu_seconds": {"qr": cpu("dry_qr"), "gram": cpu("dry_normal")},
       "compute_seconds": {k: v["compute_seconds"] for k, v in runs.items()},
       "numpy_compute_seconds": {k: v["compute_seconds"] for k, v in npy.items()},
       "loadavg_before_after": {k: open(f"{work}/{k}.load").read().strip() for k in list(runs) + list(npy)},
       "gram_vs_qr": agree}
json.dump(res, open(out, "w"), indent=2)
print(f"fits per CPU-second of fitting (best of 2): QR {best['qr_cpu']:.3f}, Gram {best['gram_cpu']:.3f}, "
      f"numpy {best['numpy_cpu']:.3f}; vs numpy: QR {res['speedup_vs_numpy_cpu_seconds']['qr']:.2f}x, "
      f"Gram {res['speedup_vs_numpy_cpu_seconds']['gram']:.2f}x (set-up CPU s: {res['setup_cpu_seconds']})")
print(f"fits per wall second of the compute phase (best of 2): QR {best['qr']:.3f}, Gram {best['gram']:.3f}, "
      f"numpy {best['numpy']:.3f}; vs numpy: QR {res['speedup_vs_numpy']['qr']:.2f}x, "
      f"Gram {res['speedup_vs_numpy']['gram']:.2f}x")
print(f"Gram vs QR over {agree['replicas']} fits: params differ by at most {agree['max_param_diff_in_fit_errors']:.3g} "
      f"(median {agree['median_param_diff_in_fit_errors']:.3g}) fit errors; fit errors agree to "
      f"{agree['max_rel_diff_fit_errors']:.3g} rel, ensemble std to {agree['max_rel_diff_ensemble_std']:.3g}; "
      f"same status: {agree['same_status']}; mean iterations QR/Gram {agree['iterations_mean_qr_gram']}")
print(f"raw: {out}")
EOF
)

# ---- nlo
# NLO against LO fit time (issue #24: NLO fit time per replica within 1.2x of LO, set-up
# reported separately). The same data and replicas (inputs/dis-mellin.ini: 5000 F2 points with
# correlated systematics) fitted at [model] order = LO, NLO, and NLO with the split sea
# (tools/make_split_config.sh: ubar, dbar, s + sbar shapes, 16 free parameters), one rank.
# Per run: set-up seconds (the phase `setup`: config, data, the Mellin tables, which is where
# NLO costs) and fit seconds per replica (the phase `compute` / fits), both from the run's
# /timing through `ensemblefit report --csv` (no python: the GPU machine has none), and the
# ratio of each fit time per replica to LO's.
#
# usage: perf/dis.sh nlo [--gpu] [REPLICAS (default 64)]
#   --gpu: [run] workers = gpu (one GPU; the batched Gram path); default the CPU worker.
#   BIN=path/to/ensemblefit overrides build/ensemblefit; WORK=dir keeps the run's files there;
#   THREADS=n sets [run] threads (default 1 on the CPU).
cmd_nlo() (
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
R=64
workers=cpu
for a in "$@"; do
    case "$a" in
        --gpu) workers=gpu ;;
        ''|*[!0-9]*) echo "usage: $0 nlo [--gpu] [REPLICAS]" >&2; exit 2 ;;
        *) R=$a ;;
    esac
done
BIN=${BIN:-$root/build/ensemblefit}
[ -x "$BIN" ] || { echo "no $BIN (build first)" >&2; exit 2; }
THREADS=${THREADS:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WORK=${WORK:-$(mktemp -d /tmp/dis-nlo.XXXXXX)}
mkdir -p "$WORK"
cp "$root/inputs/dis-mellin.ini" "$WORK/sym.ini"
cp "$root/inputs/dis-mellin.h5" "$WORK/"
bash "$root/tools/make_split_config.sh" "$WORK/sym.ini" "$WORK/split.ini"
echo "dis-mellin NLO vs LO: $R replicas (+ central), workers $workers, threads $THREADS; $(date -u +%FT%TZ)"
echo "host: $(hostname), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); files in $WORK"
common=(--fit.replicas "$R" --run.workers "$workers" --run.threads "$THREADS" --overwrite)
run() {  # name config order
    local name=$1 cfg=$2 order=$3
    "$BIN" fit "$WORK/$cfg" --model.order "$order" --output.file "$WORK/$name.h5" "${common[@]}" \
        > "$WORK/$name.log" 2>&1 || { tail -20 "$WORK/$name.log" >&2; echo "FAILED: $name" >&2; exit 1; }
    "$BIN" report "$WORK/$name.h5" --csv "$WORK/$name.csv" --overwrite > /dev/null
}
run lo sym.ini LO
run nlo sym.ini NLO
run nlo_split split.ini NLO
run lo_split split.ini LO
# CSV columns: file,ranks,workers,policy,wall_s,...,setup,compute,comm,sync,sched,idle,io (shares)
fits=$((R + 1))
awk -F, -v fits="$fits" -v w="$workers" '
    FNR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
    {
        name = FILENAME; sub(/.*\//, "", name); sub(/\.csv$/, "", name)
        wall = $col["wall_s"]; setup = wall * $col["setup"]; fit = wall * $col["compute"] / fits
        if (name == "lo") lo = fit
        order[++n] = name; S[name] = setup; F[name] = fit; W[name] = wall
    }
    END {
        printf "%-10s %-4s %10s %10s %16s %10s\n", "run", "dev", "wall_s", "setup_s", "fit_s/replica", "vs LO"
        for (k = 1; k <= n; ++k) {
            m = order[k]
            printf "%-10s %-4s %10.3f %10.3f %16.5f %10.3f\n", m, w, W[m], S[m], F[m], F[m] / lo
        }
    }' "$WORK/lo.csv" "$WORK/nlo.csv" "$WORK/nlo_split.csv" "$WORK/lo_split.csv"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
)

# ---- coverage
# Coverage of the truth by the central fit's 68 % errors with correlated systematics: DATASETS
# pseudo-datasets from `simulate dis` (each with its own draw of 3 systematic sources, 2
# normalised datasets and the point-by-point noise, made independently of the fit's Cholesky
# factor), each fitted at the given order with replicas = 0 from starts at the truth (so t0 =
# the true prediction), the valence c and d fixed (9 free parameters); counts
# |p - truth| <= sqrt(C_pp) over the free parameters.
#   perf/dis.sh coverage BUILD_DIR [DATASETS=500] [POINTS=300] [ORDER=NLO] [JOBS=2]
# Writes perf/out/coverage-HOST.json and prints the table for perf/RESULTS.md.
cmd_coverage() (
set -euo pipefail
BUILD=${1:?usage: perf/dis.sh coverage BUILD_DIR [DATASETS] [POINTS] [ORDER] [JOBS]}
DATASETS=${2:-500}
POINTS=${3:-300}
ORDER=${4:-NLO}
JOBS=${5:-2}
SRC=$(cd "$(dirname "$0")/.." && pwd)
EF=$(cd "$BUILD" && pwd)/ensemblefit
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ef-coverage.XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1

# The fit config: inputs/dis-mellin.ini with every start at the built-in truth and ORDER.
/usr/bin/python3 - "$SRC/inputs/dis-mellin.ini" "$WORK/fit.ini" "$ORDER" <<'PY'
import re, sys
truth = {"uv_a": -0.45, "uv_b": 3.2, "uv_c": 0.5, "uv_d": 3.0, "dv_a": -0.4, "dv_b": 4.5, "dv_c": 0.5,
         "dv_d": 2.0, "sea_N": 0.16, "sea_a": -1.15, "sea_b": 8.0, "sea_c": 0.0, "sea_d": 0.0,
         "g_a": -0.9, "g_b": 5.0, "g_c": 0.0, "g_d": 0.0}
out, section = [], ""
for line in open(sys.argv[1]):
    m = re.match(r"\[param\.(\w+)\]", line)
    if line.startswith("["): section = m.group(1) if m else ""
    if section and line.startswith("start ="):
        line = f"start = {truth[section]}\n"
        # The valence c, d are held at the truth: with them free the a, c, d of a flavour are
        # correlated to 0.99+ and the linearised errors do not describe the scatter (the
        # uncorrelated fit over-covers as much), which is not what this study measures.
        if section in ("uv_c", "uv_d", "dv_c", "dv_d"): line += "fixed = true\n"
    if line.startswith("fixed =") and section in ("uv_c", "uv_d", "dv_c", "dv_d"): continue
    if line.startswith("order ="): line = f"order = {sys.argv[3]}\n"
    if line.startswith("replicas ="): line = "replicas = 0\n"
    if line.startswith("file = dis-mellin.h5"): line = "file = data.h5\n"
    out.append(line)
open(sys.argv[2], "w").write("".join(out))
PY
grep -q "^systematics" "$WORK/fit.ini" || { echo "inputs/dis-mellin.ini has no systematics" >&2; exit 2; }

one() {  # one dataset: simulate, fit, print the folder
    local t=$1 d="$WORK/d$1"
    mkdir -p "$d"
    sed -e "s|^file = data.h5|file = $d/data.h5|" "$WORK/fit.ini" > "$d/fit.ini"
    "$EF" simulate dis --out "$d/data.h5" --points "$POINTS" --seed "$((1000 + t))" --order "$ORDER" \
        --syst 3 --syst-size 0.015 --datasets 2 --norm-sigma 0.02 > /dev/null
    "$EF" fit "$d/fit.ini" --output.file "$d/fit.h5" --run.threads 1 > "$d/fit.log" 2>&1
}
export -f one
export EF WORK POINTS ORDER
start=$(date +%s)
seq 1 "$DATASETS" | xargs -P "$JOBS" -I{} bash -c 'one {}'
seconds=$(( $(date +%s) - start ))

mkdir -p "$SRC/perf/out"
/usr/bin/python3 - "$WORK" "$DATASETS" "$POINTS" "$ORDER" "$seconds" "$SRC/perf/out/coverage-$(hostname).json" <<'PY'
import glob, json, math, sys
import h5py, numpy as np
work, datasets, points, order, seconds, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
hits, total, per, failed, pulls = 0, 0, {}, 0, {}
for t in range(1, datasets + 1):
    with h5py.File(f"{work}/d{t}/data.h5") as d, h5py.File(f"{work}/d{t}/fit.h5") as f:
        truth = d.attrs["truth"]
        names = [n.decode() if isinstance(n, bytes) else n for n in f["/replicas/params"].attrs["param_names"]]
        if int(f["/central/status"][()]) != 0:
            failed += 1
            continue
        p, cov = f["/central/params"][()], f["/central/covariance"][()]
        for q, name in enumerate(names):
            var = cov[q, q]
            if not (var > 0):  # a fixed parameter
                continue
            hit = abs(p[q] - truth[q]) <= math.sqrt(var)
            pulls.setdefault(name, []).append((p[q] - truth[q]) / math.sqrt(var))
            hits += hit
            total += 1
            per.setdefault(name, [0, 0])
            per[name][0] += hit
            per[name][1] += 1
cov = hits / total
result = {"datasets": datasets, "points": points, "order": order, "systematics": 3, "normalised_datasets": 2,
          "failed_central_fits": failed, "intervals": total, "coverage": cov,
          "binomial_sigma": math.sqrt(0.6827 * 0.3173 / total),
          "per_parameter": {k: v[0] / v[1] for k, v in per.items()},
          "pull_mean": {k: float(np.mean(v)) for k, v in pulls.items()},
          "pull_std": {k: float(np.std(v)) for k, v in pulls.items()}, "seconds": seconds}
json.dump(result, open(out, "w"), indent=2)
print(f"coverage {100 * cov:.1f} % of {total} intervals ({datasets} datasets x free parameters; "
      f"68.3 % expected, binomial sigma {100 * result['binomial_sigma']:.1f} %), {failed} failed fits, {seconds} s")
for k, v in result["per_parameter"].items():
    print(f"  {k:6s} {100 * v:5.1f} %   pulls: mean {result['pull_mean'][k]:+.2f}, std {result['pull_std'][k]:.2f}")
PY
)

sub=${1:-}
case "$sub" in
    stats2|solver|nlo|coverage) shift; "cmd_${sub//-/_}" "$@" ;;
    *) sed -n '3,/^$/p' "$0" >&2; exit 2 ;;
esac
