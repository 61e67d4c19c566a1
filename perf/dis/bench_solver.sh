#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Which solver should dis-mellin use by default (issue #27)? inputs/stats2.ini on the CPU, one
# thread: the QR path (`--fit.solver qr`, the table LM), the Gram path (`--fit.solver normal`)
# and the numpy peer (perf/peers/dis_numpy.py, the same replicas 0..R), each run twice,
# interleaved, in one run. Prints fits per core-second: per CPU-second of the
# fitting (the process's user + sys less a --dry-run's, which builds the same tables; the peer's
# own fit loop's process time), the measure that survives a loaded machine, and per wall second
# of the compute phase of /timing (the peer's fit loop); and the agreement of the Gram fits with the QR fits in
# units of the fit errors (sqrt of /central/covariance's diagonal, QR), and writes the raw
# numbers to perf/dis/results/solver-<machine>-<date>.json.
#
# usage: perf/dis/bench_solver.sh [REPLICAS (default 32)]
#   BIN=path/to/ensemblefit overrides build/ensemblefit; WORK=dir keeps the run's files there;
#   ANALYSE=1 only analyses the files of an earlier run in WORK.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
R=${1:-32}
case "$R" in ''|*[!0-9]*) echo "usage: $0 [REPLICAS]" >&2; exit 2 ;; esac
BIN=${BIN:-$root/build/ensemblefit}
PY=/usr/bin/python3   # Debian's python3-numpy/scipy/h5py, not the python3 first on PATH
CONFIG=inputs/stats2.ini
[ -x "$BIN" ] || { echo "no $BIN (build first)" >&2; exit 2; }
export OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 OMP_NUM_THREADS=1
WORK=${WORK:-$(mktemp -d /tmp/dis-solver.XXXXXX)}
mkdir -p "$WORK" perf/dis/results
model=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
slug=$(echo "$model" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | sed 's/-$//')-$(nproc --all)core
day=$(date +%F)
out=perf/dis/results/solver-$slug-$day.json
k=2; while [ -e "$out" ]; do out=perf/dis/results/solver-$slug-$day-$k.json; k=$((k + 1)); done
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

"$PY" - "$WORK" "$R" "$model" "$day" "$out" "$0 $*" <<'EOF'
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
