#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Many small fits (issue #5): N smeared replicas (default 1e6) of one 15 x 15 spot image, a
# 2-D Gaussian on a constant (5 parameters, inputs/spot.ini), fits per second on one GPU, in
# five variants: the user's formula (interpreted on the device) with the QR solver in double,
# with the normal-equations solver in double and in float, and the compiled-in gaussian2d model
# with the normal solver in double and in float. The CPU worker on all cores fits the first
# NCPU_FITS replicas (default 1e5) of each variant; the shared replicas are compared (GPU vs
# CPU: same bits expected), and each variant is compared with the double QR fits (float's loss).
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
cfg=inputs/spot.ini
VARIANTS=${VARIANTS:-"formula-qr-double formula-normal-double formula-normal-float gaussian2d-normal-double gaussian2d-normal-float"}
{
for v in $VARIANTS; do
  IFS=- read -r model solver prec <<<"$v"
  args=(--model.name "$model" --fit.solver "$solver" --fit.precision "$prec")
  echo "== $v: GPU, $N fits"
  EF_GPU_STATS=1 ensemblefit fit $cfg "${args[@]}" --fit.replicas "$N" --run.workers gpu --output.file "$W/$v-gpu.h5" --overwrite 2>&1 | grep -E "^(timing|  0 |\[gpu)"
  echo "== $v: CPU, 1 rank x $NCPU threads, $NC fits"
  ensemblefit fit $cfg "${args[@]}" --fit.replicas "$NC" --run.workers cpu --run.threads "$NCPU" --output.file "$W/$v-cpu.h5" --overwrite 2>&1 | grep -E "^(timing|  0 )"
done
py - "$W" "$OUT" "$VARIANTS" <<'PY'
import json, sys
import h5py, numpy as np
w, out, variants = sys.argv[1], sys.argv[2], sys.argv[3].split()
res = {"problem": "inputs/spot.ini: 2-D Gaussian + constant, 5 parameters, 15 x 15 pixels, smeared replicas",
       "variants": {}}
def load(path):
    with h5py.File(path, "r") as f:
        return (f["/replicas/params"][...], f["/replicas/status"][...], f["/replicas/iterations"][...],
                float(max(f["/timing/compute"][...])), float(max(f["/timing/wall"][...])))
ref = None
for v in variants:
    g, c = load(f"{w}/{v}-gpu.h5"), load(f"{w}/{v}-cpu.h5")
    r = {}
    for k, d in (("gpu", g), ("cpu", c)):
        fits = int(d[0].shape[0]) + 1
        r[k] = {"fits": fits, "compute_seconds": d[3], "wall_seconds": d[4], "fits_per_second": fits / d[3],
                "fits_per_second_wall": fits / d[4], "iterations_mean": float(d[2].mean()),
                "status_counts": {str(s): int((d[1] == s).sum()) for s in np.unique(d[1])}}
    m = c[0].shape[0]
    pg, pc = g[0][:m], c[0][:m]
    r["gpu_vs_cpu"] = {"replicas": int(m), "same_status": bool((g[1][:m] == c[1]).all()),
                       "same_iterations": bool((g[2][:m] == c[2]).all()),
                       "bitwise_identical_params": bool(np.array_equal(pg, pc)),
                       "max_rel_diff_params": float((np.abs(pg - pc) / np.maximum(np.abs(pc), 1e-300)).max())}
    r["gpu_speedup_over_cpu"] = r["gpu"]["fits_per_second"] / r["cpu"]["fits_per_second"]
    if ref is None:
        ref = g[0]
    else:
        sd = ref.std(axis=0)
        d = np.abs(g[0] - ref)
        r["vs_" + variants[0]] = {"max_diff_in_ensemble_sd": (d / sd).max(axis=0).tolist(),
                                  "median_rel_diff": np.median(d / np.abs(ref), axis=0).tolist(),
                                  "max_rel_diff": (d / np.abs(ref)).max(axis=0).tolist()}
    res["variants"][v] = r
json.dump(res, open(f"{out}/many_fits.json", "w"), indent=1)
print(json.dumps(res, indent=1))
PY
} 2>&1 | tee "$OUT/many_fits.log"
rm -rf "$W"
