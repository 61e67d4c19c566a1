#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue #28's runs over one node's GPUs, in one batch (GPU machine, repository root, the bundle
# of `perf/recon/gpu_run.sh prepare` carried as .gpu-run):
#   1. ensembles large enough to scale: stats2 with 25,600 replicas and the spot ensemble with
#      1e8 replicas on 1, 2 and 4 GPUs, one rank per GPU (each rank sees one GPU, as
#      jobs/rank-per-gpu.sbatch binds them): whole-command seconds and `ensemblefit report`'s
#      scaling table (set-up, sync, output per rank);
#   2. CPU and GPU ranks together: stats2 on all GPUs plus CPU ranks on the remaining cores,
#      `weighted` policy, its /replicas compared bit for bit with the GPU-only run;
#   3. ptychography at the tBL-WSe2 shape (16384 x 128^2, 12 modes, 592^2), 30 iterations, on
#      1, 2, 4 GPUs at batch 256 and 1024, single-slice, 4 slices and streaming forced: seconds per
#      iteration, efficiency and the phase error after 30 iterations against one GPU's.
#
#   bash perf/multigpu/issue28.sh               # a machine with 2 or 4 GPUs
#   REHEARSE=1 bash perf/multigpu/issue28.sh    # one GPU: small sizes, and 2 ranks sharing it,
#                                               # which exercises every multi-rank path; its
#                                               # numbers are NOT multi-GPU results
# Logs and a TSV (run, gpus, ranks, seconds, extra) under $OUT (else perf/multigpu/out).
set -uo pipefail
cd "$(dirname "$0")/../.."
source perf/recon/bench_config.sh
OUT=${OUT:-$PWD/perf/multigpu/out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-mgpu.XXXXXX)
SRC=$PWD
source .gpu-run/env.sh
gpu_machine_env
export EF_SOURCE_DIR=$SRC
NGPU=$(nvidia-smi -L | wc -l)
NCPU=$(nproc)
MPI="mpirun --bind-to none --oversubscribe"
R_STATS2=25600 R_SPOT=100000000 ITERS=30 SCAN=128
if [ "${REHEARSE:-0}" = 1 ]; then R_STATS2=2560 R_SPOT=1000000 ITERS=3 SCAN=64; fi
# GPU counts to run: 1, 2, 4 up to the machine's; a rehearsal puts 2 ranks on its one GPU.
COUNTS=()
for g in 1 2 4; do [ "$g" -le "$NGPU" ] && COUNTS+=("$g"); done
[ "${REHEARSE:-0}" = 1 ] && [ "$NGPU" -eq 1 ] && COUNTS=(1 2)
TSV=$OUT/issue28.tsv
printf 'run\tgpus\tranks\tseconds\textra\n' > "$TSV"
step() { echo; echo "== $* ($(date +%T))"; }
check() { local rc=$?; [ $rc -eq 0 ] || echo "!! step failed (exit $rc)"; }
# One rank per GPU, as Slurm's --gpus-per-task=1 binds them: rank i sees GPU i (a rehearsal
# with more ranks than GPUs lets them share).
cat > "$W/bind.sh" <<'SH'
#!/usr/bin/env bash
n=$(nvidia-smi -L | wc -l)
[ "${OMPI_COMM_WORLD_LOCAL_SIZE:-1}" -le "$n" ] && export CUDA_VISIBLE_DEVICES=${OMPI_COMM_WORLD_LOCAL_RANK:-0}
exec "$@"
SH
chmod +x "$W/bind.sh"
# timed NAME GPUS RANKS EXTRA CMD...: the whole command's wall seconds into the TSV.
timed() {
    local name=$1 g=$2 n=$3 extra=$4; shift 4
    local t0 t1 rc=0
    t0=$(date +%s.%N)
    "$@" > "$W/$name.log" 2>&1 || rc=$?
    t1=$(date +%s.%N)
    tail -25 "$W/$name.log"
    [ $rc -eq 0 ] || echo "!! $name failed (exit $rc)"
    printf '%s\t%s\t%s\t%.3f\t%s\n' "$name" "$g" "$n" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" "$extra" | tee -a "$TSV"
}
cp inputs/stats2.ini inputs/dis-mellin-lo.h5 inputs/spot.ini inputs/spot.csv "$W"/
cd "$W"
{
nvidia-smi -L
step "1. ensembles: stats2 ($R_STATS2 replicas) and spot ($R_SPOT replicas), one rank per GPU"
for g in "${COUNTS[@]}"; do
    timed "stats2_$g" "$g" "$g" "" $MPI -np "$g" ./bind.sh ensemblefit fit stats2.ini --run.workers gpu \
        --fit.replicas "$R_STATS2" --output.file "stats2_$g.h5" --overwrite
    timed "spot_$g" "$g" "$g" "" $MPI -np "$g" ./bind.sh ensemblefit fit spot.ini --run.workers gpu \
        --fit.solver normal --fit.precision float --fit.replicas "$R_SPOT" --output.file "spot_$g.h5" --overwrite
done
ensemblefit report stats2_*.h5 --csv "$OUT/stats2_scaling.csv"; check
ensemblefit report spot_*.h5 --csv "$OUT/spot_scaling.csv"; check
G=${COUNTS[-1]}
C=$(( NCPU - G > 1 ? NCPU - G : 1 ))
step "2. stats2 on $G GPU rank(s) plus $C CPU rank(s), weighted policy"
timed "mixed_${G}g${C}c" "$G" "$((G + C))" "cpu ranks $C" $MPI -np "$G" ./bind.sh ensemblefit fit stats2.ini \
    --run.workers gpu --sched.policy weighted --fit.replicas "$R_STATS2" --output.file mixed.h5 --overwrite \
    : -np "$C" -x CUDA_VISIBLE_DEVICES= ensemblefit fit stats2.ini --run.workers cpu --run.threads 1 \
    --sched.policy weighted --fit.replicas "$R_STATS2" --output.file mixed.h5 --overwrite
py - "stats2_$G.h5" mixed.h5 <<'PY'
import sys, h5py, numpy as np
a, b = (h5py.File(f, "r") for f in sys.argv[1:3])
same = all(np.array_equal(a["/replicas"][k][...], b["/replicas"][k][...]) for k in a["/replicas"])
print(f"mixed vs GPU-only /replicas: {'bitwise equal' if same else 'DIFFERENT'}")
PY
check
step "3. ptychography, tBL-WSe2 shape (scan $SCAN x $SCAN, 128 px, 12 modes), $ITERS iterations"
simulate_bench "$SCAN" > /dev/null; check
write_bench_ini bench.ini "$ITERS"
for variant in "b256:" "b1024:--solver.batch_size 1024" "slices4:--model.slices 4 --model.slice_thickness 2.5e-9" \
               "stream:--run.stream on"; do
    tag=${variant%%:*} args=${variant#*:}
    for g in "${COUNTS[@]}"; do
        # shellcheck disable=SC2086
        timed "ptycho_${tag}_$g" "$g" "$g" "$args" $MPI -np "$g" ./bind.sh ensemblefit reconstruct bench.ini $args \
            --output.file "ptycho_${tag}_$g.h5"
    done
done
py - "$OUT/ptycho.tsv" <<'PY'
import glob, sys, h5py
rows = ["variant\tgpus\ts_per_iteration\tefficiency\tphase_nrmse\tnrmse_vs_1gpu"]
for tag in ("b256", "b1024", "slices4", "stream"):
    base = None
    for f in sorted(glob.glob(f"ptycho_{tag}_*.h5"), key=lambda p: int(p.rsplit("_", 1)[1][:-3])):
        g = int(f.rsplit("_", 1)[1][:-3])
        h = h5py.File(f, "r")
        s = float(h["/timing"].attrs["seconds_per_iteration"])
        e = float(h.attrs.get("phase_nrmse", float("nan")))
        if g == 1:
            base = (s, e)
        eff = base[0] / (g * s) if base else float("nan")
        rows.append(f"{tag}\t{g}\t{s:.4f}\t{eff:.3f}\t{100 * e:.3f}%\t{100 * (e - base[1]) if base else float('nan'):+.3f} points")
print("\n".join(rows))
open(sys.argv[1], "w").write("\n".join(rows) + "\n")
PY
check
} 2>&1 | tee "$OUT/issue28.log"
cp "$W"/*.log "$OUT"/ 2>/dev/null
rm -rf "$W"
echo "failed steps: $(grep -c '^!! ' "$OUT/issue28.log")"
