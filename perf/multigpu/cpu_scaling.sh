#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CPU ranks on one whole node (issue 35): stats2 (inputs/stats2.ini, dis-mellin) on 1, 2, 4, ...,
# N ranks (N = nproc, added last when not a power of two), one core per rank (mpirun --bind-to
# core, one OpenMP thread each), timed as whole commands from exec to exit:
#   weak:   40 replicas per rank (40 N in all); efficiency = t(1) / t(N)
#   strong: 2,560 replicas in all;               efficiency = t(1) / (N t(N))
# From the bundle of `perf/recon/gpu_run.sh prepare` carried as .gpu-run (as issue28.sh uses it):
#   bash perf/multigpu/cpu_scaling.sh              # every power of two up to nproc, and nproc
#   RANKS="1 4 16 64" bash perf/multigpu/cpu_scaling.sh
#   STRONG_REPLICAS=2560 WEAK_PER_RANK=40 ...      # the defaults
# Prints and writes $OUT/cpu_scaling.tsv (else perf/multigpu/out): mode, ranks, replicas, whole
# command seconds, efficiency, and from /timing the slowest rank's set-up and compute, the mean
# compute, and the model line's table placement (one copy per node, or per rank).
set -uo pipefail
cd "$(dirname "$0")/../.."
SRC=$PWD
OUT=${OUT:-$PWD/perf/multigpu/out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-cpu.XXXXXX)
if [ -f .gpu-run/env.sh ]; then
    source perf/recon/bench_config.sh
    source .gpu-run/env.sh
    gpu_machine_env
else  # a build on PATH (a CPU machine): python3 with h5py
    py() { /usr/bin/python3 "$@"; }
fi
NCPU=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc follows OMP_NUM_THREADS
export EF_SOURCE_DIR=$SRC OMP_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=
WEAK_PER_RANK=${WEAK_PER_RANK:-40}
STRONG_REPLICAS=${STRONG_REPLICAS:-2560}
if [ -z "${RANKS:-}" ]; then
    RANKS=""
    for ((n = 1; n <= NCPU; n *= 2)); do RANKS+="$n "; done
    case " $RANKS " in *" $NCPU "*) ;; *) RANKS+="$NCPU" ;; esac
fi
MPI="mpirun --bind-to core --map-by core"
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cp inputs/stats2.ini inputs/dis-mellin-lo.h5 "$W"/
cd "$W"
TSV=$OUT/cpu_scaling.tsv
printf 'mode\tranks\treplicas\tseconds\tefficiency\tsetup_max\tcompute_max\tcompute_mean\ttables\n' > "$TSV"
echo "# $(date -u +%FT%TZ) $(hostname) $NCPU CPUs: $(lscpu | sed -n 's/^Model name: *//p')" | tee "$OUT/cpu_scaling.log"
# run MODE RANKS REPLICAS: one whole command, its row appended (efficiency filled in below).
run() {
    local mode=$1 n=$2 m=$3 t0 t1 rc=0
    t0=$(date +%s.%N)
    $MPI -np "$n" ensemblefit fit stats2.ini --run.workers cpu --run.threads 1 --fit.replicas "$m" \
        --output.file "${mode}_$n.h5" --overwrite > "${mode}_$n.log" 2>&1 || rc=$?
    t1=$(date +%s.%N)
    [ $rc -eq 0 ] || { tail -20 "${mode}_$n.log"; echo "!! $mode $n ranks failed (exit $rc)"; }
    local tables
    tables=$(grep -o 'tables [0-9.]* MB[^;]*' "${mode}_$n.log" | head -1)
    py - "${mode}_$n.h5" "$mode" "$n" "$m" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" "${tables:-tables per rank (or one rank)}" <<'PY' >> "$TSV"
import sys, h5py, numpy as np
path, mode, n, m, sec, tables = sys.argv[1:7]
try:
    t = h5py.File(path, "r")["/timing"]
    setup, comp = np.asarray(t["setup"][...]), np.asarray(t["compute"][...])
    extra = f"{setup.max():.3f}\t{comp.max():.3f}\t{comp.mean():.3f}"
except Exception as e:  # a failed run: its seconds still count
    extra = "nan\tnan\tnan"
print(f"{mode}\t{n}\t{m}\t{float(sec):.3f}\t-\t{extra}\t{tables}")
PY
    tail -1 "$TSV"
}
for n in $RANKS; do run weak "$n" $((WEAK_PER_RANK * n)); done
for n in $RANKS; do run strong "$n" "$STRONG_REPLICAS"; done
# Efficiencies against each mode's 1-rank row.
py - "$TSV" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
base = {r[0]: float(r[3]) for r in rows[1:] if r[1] == "1"}
for r in rows[1:]:
    n, s = int(r[1]), float(r[3])
    if r[0] in base:
        r[4] = f"{base[r[0]] / s:.3f}" if r[0] == "weak" else f"{base[r[0]] / (n * s):.3f}"
open(sys.argv[1], "w").write("\n".join("\t".join(r) for r in rows) + "\n")
PY
echo
column -t -s $'\t' "$TSV" | tee -a "$OUT/cpu_scaling.log"
rm -rf "$W"
