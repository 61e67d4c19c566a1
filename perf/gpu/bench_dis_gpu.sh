#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The dis-mellin stats2 benchmark of issue #5 on the GPU machine, in one run:
#   1. `ensemblefit devices`: measured FP64/FP32 peaks, bandwidths, and the table GEMM kernel
#      vs cuBLAS DGEMM at the stats2 shape;
#   2. the GPU tests (GPU vs CPU on the same replicas);
#   3. inputs/stats2.ini, replicas 0..R (default 2560): one GPU rank; the CPU worker on all the
#      machine's cores (1 rank, nproc threads); the PyTorch peer (perf/peers/dis_torch.py, the
#      machine's own PyTorch) on the same GPU with the same tables and replicas;
#   4. a summary (replicas/s, GPU vs CPU and peer vs GPU agreement) into $OUT/summary.json.
#
#   bash perf/gpu/bench_dis_gpu.sh [R]        # GPU machine, repository root, .gpu-run carried
#   SOLVERS="qr normal" ...                    # also the Gram (normal-equations) path
#   CPU_REPLICAS=N, SKIP_TESTS=1, COMPILE=1    # fewer CPU replicas, no GPU tests, torch.compile peer
#
# .gpu-run comes from `tools/gpu/bundle-runtime.sh .gpu-run build-gpu/ensemblefit
# build-gpu/tests/gpu_tests` (sm_90 build; see perf/recon/gpu_run.sh prepare for the size trims).
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${1:-2560}
OUT=${OUT:-$PWD/perf/gpu/out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-dis.XXXXXX)
ORIG_LD=${LD_LIBRARY_PATH:-}
py() { LD_LIBRARY_PATH="$ORIG_LD" python3 "$@"; }  # the machine's Python (PyTorch, h5py)
source .gpu-run/env.sh
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64 EF_SOURCE_DIR=$PWD PYTHONUNBUFFERED=1
NCPU=$(nproc)
step() { echo; echo "== $* ($(date +%T))"; }
timed() {  # name, command...: wall seconds into $W/name.time
    local name=$1; shift
    local t0; t0=$(date +%s.%N)
    "$@"; local rc=$?
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f\n", b - a }' > "$W/$name.time"
    echo "   [$name: rc $rc, $(cat "$W/$name.time") s wall]"
    return $rc
}
{
step "devices"
ensemblefit devices
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
step "GPU tests"
[ "${SKIP_TESTS:-0}" = 1 ] || timed gpu_tests gpu_tests 2>&1 | grep -v "load callback\|cuFFT plan" | tail -30
step "export the stats2 tables and replicas 0..$R for the peer"
timed export ensemblefit export dis-table inputs/stats2.ini --out "$W/table.h5" --replicas "$R" --overwrite
fit=(ensemblefit fit inputs/stats2.ini --fit.replicas "$R" --overwrite)
CR=${CPU_REPLICAS:-$R}
SOLVERS=${SOLVERS:-qr}   # qr (batched QR table path) and/or normal (the Gram path)
for s in $SOLVERS; do
    step "ensemblefit, 1 GPU, solver $s"
    EF_GPU_STATS=1 timed gpu_$s "${fit[@]}" --fit.solver "$s" --run.workers gpu --output.file "$W/gpu_$s.h5"
    step "ensemblefit, CPU worker, 1 rank x $NCPU threads, solver $s, replicas 0..$CR (the GPU's first)"
    timed cpu_$s ensemblefit fit inputs/stats2.ini --fit.solver "$s" --fit.replicas "$CR" --overwrite \
        --run.workers cpu --run.threads "$NCPU" --output.file "$W/cpu_$s.h5"
done
first=${SOLVERS%% *}
step "PyTorch peer, same GPU, same tables and replicas"
timed torch py perf/peers/dis_torch.py "$W/table.h5" --device cuda --json "$OUT/torch.json" --compare "$W/gpu_$first.h5"
if [ "${COMPILE:-0}" = 1 ]; then
    step "PyTorch peer with torch.compile"
    timed torch_compile py perf/peers/dis_torch.py "$W/table.h5" --device cuda --compile \
        --json "$OUT/torch_compile.json" --compare "$W/gpu_$first.h5"
fi
step "summary"
py - "$W" "$OUT" "$R" "$SOLVERS" <<'PY'
import json, os, sys
import h5py, numpy as np
w, out, R, solvers = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split()
def load(name):
    with h5py.File(f"{w}/{name}.h5", "r") as f:
        p = np.vstack([f["/central/params"][...][None], f["/replicas/params"][...]])
        st = np.concatenate([f["/central/status"][...], f["/replicas/status"][...]])
        it = np.concatenate([f["/central/iterations"][...], f["/replicas/iterations"][...]])
        c2 = np.concatenate([f["/central/chi2"][...], f["/replicas/chi2"][...]])
        comp = float(max(f["/timing/compute"][...]))
    return dict(p=p, st=st, it=it, c2=c2, compute=comp)
res = {"replicas": R + 1, "runs": {}}
names = [f"{b}_{s}" for s in solvers for b in ("gpu", "cpu")]
runs = {k: load(k) for k in names if os.path.exists(f"{w}/{k}.h5")}
for k, d in runs.items():
    wall = float(open(f"{w}/{k}.time").read())
    res["runs"][k] = {"compute_seconds": d["compute"], "wall_seconds": wall,
                      "replicas_per_second": d["p"].shape[0] / d["compute"],
                      "iterations_mean": float(d["it"].mean()),
                      "status_counts": {str(s): int((d["st"] == s).sum()) for s in np.unique(d["st"])}}
for s in solvers:
    if f"gpu_{s}" not in runs or f"cpu_{s}" not in runs:
        continue
    g, c = dict(runs[f"gpu_{s}"]), runs[f"cpu_{s}"]
    m = c["p"].shape[0]
    for key in ("p", "st", "it", "c2"):
        g[key] = g[key][:m]
    den = np.maximum(np.abs(c["p"]), 1e-300)
    rel = np.abs(g["p"] - c["p"]) / den
    res[f"gpu_vs_cpu_{s}"] = {"replicas_compared": int(m), "same_status": bool((g["st"] == c["st"]).all()),
                         "same_iterations": bool((g["it"] == c["it"]).all()),
                         "bitwise_identical_params": bool(np.array_equal(g["p"], c["p"])),
                         "max_rel_diff_params": float(rel.max()),
                         "max_rel_diff_chi2": float((np.abs(g["c2"] - c["c2"]) / np.abs(c["c2"])).max()),
                         "speedup_gpu_over_cpu_replicas_per_second": res["runs"][f"gpu_{s}"]["replicas_per_second"] / res["runs"][f"cpu_{s}"]["replicas_per_second"]}
if "gpu_qr" in runs and "gpu_normal" in runs:
    a, b = runs["gpu_qr"], runs["gpu_normal"]
    sd = a["p"].std(axis=0)
    ok = sd > 0
    conv = (a["st"] == 0) & (b["st"] == 0)  # replicas converged on both paths
    d = np.abs(a["p"] - b["p"])[:, ok] / sd[ok]
    c2 = np.abs(a["c2"] - b["c2"]) / np.abs(a["c2"])
    res["normal_vs_qr_gpu"] = {"max_diff_in_ensemble_sd": float(d.max()), "max_rel_diff_chi2": float(c2.max()),
                               "converged_on_both": int(conv.sum()),
                               "converged_max_diff_in_ensemble_sd": float(d[conv].max()),
                               "converged_median_diff_in_ensemble_sd": float(np.median(d[conv])),
                               "converged_max_rel_diff_chi2": float(c2[conv].max()),
                               "same_status": bool((a["st"] == b["st"]).all())}
for k in ("torch", "torch_compile"):
    f = f"{out}/{k}.json"
    if os.path.exists(f):
        t = json.load(open(f))
        res[k] = {x: t.get(x) for x in ("replicas_per_second", "seconds", "wall_seconds", "rounds", "iterations_mean",
                                         "compiled", "comparison", "torch", "device") if x in t}
        for s in solvers:
            if f"gpu_{s}" in res["runs"] and t.get("replicas_per_second"):
                res[k][f"ensemblefit_gpu_{s}_speedup_over_peer"] = res["runs"][f"gpu_{s}"]["replicas_per_second"] / t["replicas_per_second"]
json.dump(res, open(f"{out}/summary.json", "w"), indent=1)
print(json.dumps(res, indent=1))
PY
} 2>&1 | tee "$OUT/bench.log"
rm -rf "$W"
