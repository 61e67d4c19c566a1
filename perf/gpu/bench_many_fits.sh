#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Many small fits (issue #5): N smeared replicas (default 1e6) of one 15 x 15 spot image, a
# 2-D Gaussian on a constant (5 parameters, perf/gpu/gauss2d/spot.ini, the formula interpreted
# on the device), fits per second on one GPU; the CPU worker on all cores fits the first
# NCPU_FITS replicas (default 1e5) of the same ensemble, and the shared replicas are compared.
#
#   bash perf/gpu/bench_many_fits.sh [N]     # GPU machine, repository root, .gpu-run carried
set -uo pipefail
cd "$(dirname "$0")/../.."
N=${1:-1000000}
NC=${NCPU_FITS:-100000}
OUT=${OUT:-$PWD/perf/gpu/out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-spot.XXXXXX)
ORIG_LD=${LD_LIBRARY_PATH:-}
py() { LD_LIBRARY_PATH="$ORIG_LD" python3 "$@"; }
[ -n "${OPAL_PREFIX:-}" ] || source .gpu-run/env.sh
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
NCPU=$(nproc)
cfg=perf/gpu/gauss2d/spot.ini
{
echo "== GPU: $N fits"
ensemblefit fit $cfg --fit.replicas "$N" --run.workers gpu --output.file "$W/gpu.h5" --overwrite 2>&1 | tail -14
echo "== CPU, 1 rank x $NCPU threads: $NC fits"
ensemblefit fit $cfg --fit.replicas "$NC" --run.workers cpu --run.threads "$NCPU" --output.file "$W/cpu.h5" --overwrite 2>&1 | tail -14
py - "$W" "$OUT" "$N" "$NC" <<'PY'
import json, sys
import h5py, numpy as np
w, out, N, NC = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
res = {"model": "2-D Gaussian + constant, 5 parameters, 15 x 15 pixels (formula)", "runs": {}}
d = {}
for k in ("gpu", "cpu"):
    with h5py.File(f"{w}/{k}.h5", "r") as f:
        p = f["/replicas/params"][...]; st = f["/replicas/status"][...]; it = f["/replicas/iterations"][...]
        comp = float(max(f["/timing/compute"][...]))
    d[k] = (p, st, it)
    res["runs"][k] = {"fits": int(p.shape[0]) + 1, "compute_seconds": comp, "fits_per_second": (p.shape[0] + 1) / comp,
                      "iterations_mean": float(it.mean()),
                      "status_counts": {str(s): int((st == s).sum()) for s in np.unique(st)}}
m = min(d["gpu"][0].shape[0], d["cpu"][0].shape[0])
pg, pc = d["gpu"][0][:m], d["cpu"][0][:m]
rel = np.abs(pg - pc) / np.maximum(np.abs(pc), 1e-300)
res["gpu_vs_cpu_first_%d" % m] = {"same_status": bool((d["gpu"][1][:m] == d["cpu"][1][:m]).all()),
    "same_iterations": bool((d["gpu"][2][:m] == d["cpu"][2][:m]).all()),
    "bitwise_identical_params": bool(np.array_equal(pg, pc)), "max_rel_diff_params": float(rel.max())}
res["speedup_gpu_over_cpu_per_fit"] = res["runs"]["gpu"]["fits_per_second"] / res["runs"]["cpu"]["fits_per_second"]
json.dump(res, open(f"{out}/many_fits.json", "w"), indent=1)
print(json.dumps(res, indent=1))
PY
} 2>&1 | tee "$OUT/many_fits.log"
rm -rf "$W"
