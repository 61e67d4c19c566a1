#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 35, the reconstruction's part, in one call: whole-command seconds (exec to exit) of the
# tBL-WSe2-shaped benchmark on 1, 2 and 4 GPUs, 200 iterations, with where rank 0's time went
# (/timing: setup, io, compute, ...) and the whole-command efficiency T1 / (g Tg); then the bits:
# 48-, 80- and 96-pixel reconstructions on 1, 2 and 4 GPUs and on 2 GPUs with moving unequal
# shares (--debug.speeds), /object /probe /positions /loss compared with 1 GPU's.
#
#   bash perf/recon/whole_command.sh              # GPU machine, repository root, the bundle of
#                                                 # `perf/recon/gpu_run.sh prepare` as .gpu-run
#   LOCAL=1 bash perf/recon/whole_command.sh      # a CPU machine with ensemblefit on PATH: a
#                                                 # reduced shape (64 x 64 scan, 1 mode, 1 iteration,
#                                                 # CPU workers), 1 and 2 ranks: the io split only
# Output: a TSV (run, ranks, seconds, setup, io, compute, s_per_iteration) and logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source perf/recon/bench_config.sh
OUT=${OUT:-$PWD/perf/recon/out-whole}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/ef-whole.XXXXXX)
ITERS=${ITERS:-200} SCAN=128 COUNTS=(1 2 4) MPI="mpirun --bind-to none --oversubscribe"
if [ "${LOCAL:-0}" = 1 ]; then
    ITERS=1 SCAN=64 COUNTS=(1 2)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    py() { /usr/bin/python3 "$@"; }
    BIND=""
else
    source .gpu-run/env.sh
    gpu_machine_env
    NGPU=$(nvidia-smi -L | wc -l)
    COUNTS=()
    for g in 1 2 4; do [ "$g" -le "$NGPU" ] && COUNTS+=("$g"); done
    cat > "$W/bind.sh" <<'SH'
#!/usr/bin/env bash
export CUDA_VISIBLE_DEVICES=${OMPI_COMM_WORLD_LOCAL_RANK:-0}
exec "$@"
SH
    chmod +x "$W/bind.sh"
    BIND=./bind.sh
fi
TSV=$OUT/whole_command.tsv
printf 'run\tranks\tseconds\tsetup0\tio0\tcompute0\ts_per_iteration\n' > "$TSV"
cd "$W"
# timed NAME RANKS CMD...: the whole command's wall seconds and rank 0's phases into the TSV.
timed() {
    local name=$1 n=$2; shift 2
    local t0 t1 rc=0
    t0=$(date +%s.%N)
    "$@" > "$name.log" 2>&1 || rc=$?
    t1=$(date +%s.%N)
    [ $rc -eq 0 ] || { tail -20 "$name.log"; echo "!! $name failed (exit $rc)"; }
    py - "$name" "$n" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" "$TSV" <<'PY'
import sys, h5py
name, n, secs, tsv = sys.argv[1:5]
t = h5py.File(f"{name}.h5", "r")["/timing"]
row = [name, n, f"{float(secs):.3f}"] + [f"{t[k][0]:.3f}" for k in ("setup", "io", "compute")]
row.append(f"{t.attrs['seconds_per_iteration']:.4f}")
print("\t".join(row))
open(tsv, "a").write("\t".join(row) + "\n")
PY
}
{
[ "${LOCAL:-0}" = 1 ] || nvidia-smi -L
echo "== whole command, tBL-WSe2 shape (scan $SCAN), $ITERS iterations ($(date +%T))"
simulate_bench "$SCAN" > /dev/null || echo "!! simulate failed"
write_bench_ini bench.ini "$ITERS"
if [ "${LOCAL:-0}" = 1 ]; then sed -i 's/workers = gpu/workers = cpu/; s/^modes = 12/modes = 1/' bench.ini; fi
for g in "${COUNTS[@]}"; do
    # shellcheck disable=SC2086
    timed "whole_$g" "$g" $MPI -np "$g" $BIND ensemblefit reconstruct bench.ini --output.file "whole_$g.h5" \
        --trace "whole_$g.trace.json"
done
awk -F'\t' 'NR > 1 && $1 ~ /^whole_/ { if ($2 == 1) t1 = $3; if (t1) printf "%s ranks: whole command %.2f s, efficiency %.1f %%\n", $2, $3, 100 * t1 / ($2 * $3) }' "$TSV"
[ "${LOCAL:-0}" = 1 ] && exit 0
echo "== bits: 48, 80, 96 px on ${COUNTS[*]} GPUs and on 2 with moving unequal shares ($(date +%T))"
for dp in 48 80 96; do
    ensemblefit simulate ptycho --out "s$dp.h5" --scan 32 --dp "$dp" --modes 3 --dose 1e6 --mode-power 0.1 \
        --jitter 0.2 --scan-pattern raster --overwrite > /dev/null
    args=(--data.file "s$dp.h5" --model.modes 3 --solver.iterations 20 --solver.batch_size 64 --positions.start 3
          --run.balance throughput)
    for g in "${COUNTS[@]}"; do
        $MPI -np "$g" $BIND ensemblefit reconstruct bench.ini "${args[@]}" --output.file "b${dp}_$g.h5" > "b${dp}_$g.log" 2>&1
    done
    $MPI -np 2 $BIND ensemblefit reconstruct bench.ini "${args[@]}" --debug.speeds 1,5/3,1 --output.file "b${dp}_sp.h5" \
        > "b${dp}_sp.log" 2>&1
    for f in "b${dp}"_*.h5; do
        [ "$f" = "b${dp}_1.h5" ] && continue
        py "$EF_SOURCE_DIR/tests/tools/h5check.py" equal "b${dp}_1.h5" "$f" /object /probe /positions /loss > /dev/null &&
            echo "$dp px: $f bitwise equal to 1 GPU" || echo "$dp px: $f DIFFERS from 1 GPU"
    done
done
} 2>&1 | tee "$OUT/whole_command.log"
cp "$W"/*.trace.json "$OUT"/ 2>/dev/null
