#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# GPU mode of perf/dis/bench_stats2.sh (issue #27; read its header): stats2 on one GPU, the Gram
# and QR table paths with the round loop on the device and on the host, beside the PyTorch peer,
# and the table GEMM against the FP64 FMA peak. Every step runs whatever the previous ones did;
# logs, the peer's JSON and summary.json go to $OUT.
#
#   bash perf/dis/bench_stats2.sh --gpu [REPLICAS]     # GPU machine, repository root, .gpu-run carried
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${1:-2560}
case "$R" in ''|*[!0-9]*) echo "usage: $0 [REPLICAS]" >&2; exit 2 ;; esac
OUT=${OUT:-$PWD/perf/dis/out}
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
