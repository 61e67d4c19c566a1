#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ensemblefit advise` on a machine without a GPU: a table of CPU placements and a recommendation
# for the fit example and the ptychography example within the budget; -o writes the
# predictions, a run with --predicted stores the matching one beside its /timing, and `report`
# shows predicted against measured. Bad arguments and a bad prediction file are usage/data errors.
source "$(dirname "$0")/../tools/mpi_common.sh"
cp "$SRC/inputs/example.ini" "$SRC/inputs/decay.csv" "$SRC/inputs/ptycho.ini" "$SRC/inputs/ptycho_small.h5" .

# On a GPU machine the table has GPU rows too (1, 2 and 4 ranks on the GPU, and beside CPU ranks).
HAVE_GPU=1
"$EF" devices --no-probe | grep -q "no CUDA device" && HAVE_GPU=0

check_advice() {  # LOG BUDGET ELAPSED
    local log=$1 budget=$2 elapsed=$3
    grep -q "^1 cpu x" "$log" || { cat "$log"; fail "no single-rank CPU row"; }
    if [ "$HAVE_GPU" = 0 ]; then
        grep -q "CPU rows only" "$log" || { cat "$log"; fail "no note that only CPU rows are given"; }
        grep -q "gpu x" "$log" && { cat "$log"; fail "GPU rows without a GPU"; }
    else
        for k in "1 rank" "2 ranks" "4 ranks"; do
            grep -q "^[0-9]* gpu x $k " "$log" || { cat "$log"; fail "no GPU row with $k per GPU"; }
        done
    fi
    grep -q "<- recommended" "$log" || { cat "$log"; fail "no recommended row"; }
    grep -q "^recommended: .*: " "$log" || { cat "$log"; fail "no reason for the recommendation"; }
    grep -q "^  mpirun --bind-to none -np [0-9]* ensemblefit" "$log" || { cat "$log"; fail "no command line"; }
    grep -q "^  Slurm: \(sbatch --nodes=1 --ntasks-per-node=[0-9]* --cpus-per-task=[0-9]* .*jobs/[a-z-]*\.sbatch \|no jobs/ script gives this placement (\)" "$log" ||
        { cat "$log"; fail "no Slurm line"; }
    # The budget bounds the calibration; start-up and the in-process set-up come on top.
    [ "$elapsed" -le $((budget + 30)) ] || fail "advise took ${elapsed} s with --budget $budget"
}

start=$(date +%s)
"$EF" advise example.ini --fit.replicas 200 --budget 6 -o fit.tsv > fit_advice.log
check_advice fit_advice.log 6 $(( $(date +%s) - start ))
grep -q "(fit: 201 replica fits)" fit_advice.log || { cat fit_advice.log; fail "fit size not read from the config"; }
grep -q "^work: .* FLOP per replica fit" fit_advice.log || { cat fit_advice.log; fail "no counted work per fit"; }
grep -q "^  cpu  *1 " fit_advice.log || { cat fit_advice.log; fail "no one-thread calibration run listed"; }
# Start-up measured: advise (a singleton here) times mpirun itself, in the environment it started with.
grep -q "^  start-up measured: \`mpirun -np 1 ensemblefit --version\` [0-9.]* s, [0-9.]* s; -np 2 [0-9.]* s" \
    fit_advice.log || { cat fit_advice.log; fail "mpirun's start-up not measured"; }
# The sbatch line names a script whose own check (`ensemblefit job-check`, which the script runs
# first) accepts the allocation the line asks for on this machine's cores; the issue's two lines
# that the scripts refused are refused by it too, each in one line (exit 2).
line=$(sed -n 's/^  Slurm: sbatch //p' fit_advice.log)
[ -n "$line" ] || { cat fit_advice.log; fail "no sbatch line for a fit"; }
script=$(grep -o 'jobs/[a-z-]*\.sbatch' <<< "$line" | head -n 1)
tasks=$(sed -n 's/.*--ntasks-per-node=\([0-9]*\).*/\1/p' <<< "$line")
cpus=$(sed -n 's/.*--cpus-per-task=\([0-9]*\).*/\1/p' <<< "$line")
echo "advise's line: $line"
SLURM_CPUS_ON_NODE=$(getconf _NPROCESSORS_ONLN) SLURM_NTASKS_PER_NODE=$tasks SLURM_CPUS_PER_TASK=$cpus "$EF" job-check "$SRC/$script" > jc.log ||
    { cat jc.log; fail "$script refuses advise's line $line"; }
# Told the node (--node-cores 64, a compute node seen from here): the line fills that node and
# the script's rule accepts it there, not on this machine.
"$EF" advise example.ini --fit.replicas 200 --budget 2 --node-cores 64 > node64.log
grep -q "^machine: 64 cores of the node given by --node-cores" node64.log || { cat node64.log; fail "--node-cores not taken"; }
line=$(sed -n 's/^  Slurm: sbatch //p' node64.log)
tasks=$(sed -n 's/.*--ntasks-per-node=\([0-9]*\).*/\1/p' <<< "$line")
cpus=$(sed -n 's/.*--cpus-per-task=\([0-9]*\).*/\1/p' <<< "$line")
[ "$((tasks * cpus))" = 64 ] || { cat node64.log; fail "the line for a 64-core node does not fill it: $line"; }
SLURM_CPUS_ON_NODE=64 SLURM_NTASKS_PER_NODE=$tasks SLURM_CPUS_PER_TASK=$cpus "$EF" job-check rank-per-core.sbatch > jc64.log ||
    { cat jc64.log; fail "rank-per-core.sbatch refuses advise's line for a 64-core node: $line"; }
expect_error 2 "hybrid.sbatch: no GPUs in this allocation \(--gpus-per-node\)" -- \
    env SLURM_CPUS_ON_NODE=2 SLURM_NTASKS_PER_NODE=2 "$EF" job-check "$SRC/jobs/hybrid.sbatch"
expect_error 2 "rank-per-core.sbatch: 32 task\(s\) x 1 CPU\(s\) per task exceed the node's 2 CPU\(s\)" -- \
    env SLURM_CPUS_ON_NODE=2 SLURM_NTASKS_PER_NODE=32 "$EF" job-check rank-per-core.sbatch
expect_error 2 "job-check: not inside a Slurm job" -- env -u SLURM_CPUS_ON_NODE "$EF" job-check rank-per-core.sbatch
ok "fit: CPU table, recommendation, command line, mpirun's start-up measured in $(( $(date +%s) - start )) s"

start=$(date +%s)
"$EF" advise ptycho.ini --solver.iterations 4 --budget 8 > recon_advice.log
check_advice recon_advice.log 8 $(( $(date +%s) - start ))
grep -q "reconstruction: 576 positions x 4 iterations, mini-batches of 32" recon_advice.log ||
    { cat recon_advice.log; fail "reconstruction size not read from the config"; }
# The defocus trials (no probe in ptycho_small.h5) counted, and 2 ranks calibrated through mpirun.
grep -q "and up to 18 iterations of probe defocus trials before them" recon_advice.log ||
    { cat recon_advice.log; fail "the defocus trials are not in the prediction"; }
grep -q "^  cpu     2 ranks x 1 thread (mpirun), mini-batches of 32: [0-9.]* s for the last iteration" recon_advice.log ||
    { cat recon_advice.log; fail "no 2-rank calibration run"; }
grep -q "; with 2 ranks[a-zA-Z ]*, [0-9.e+-]* ms per mini-batch beyond its compute" recon_advice.log ||
    { cat recon_advice.log; fail "no per-batch cost of 2 ranks"; }
ok "reconstruction: CPU table and recommendation, defocus trials and a 2-rank calibration, in $(( $(date +%s) - start )) s"

# The prediction file: a header and one row per placement, one of them recommended.
[ "$(grep -c $'\t1$' fit.tsv)" = 1 ] || { cat fit.tsv; fail "not exactly one recommended row"; }
# The 2-rank CPU row (2 x 1 thread here; 2 x 8 threads on 16 cores): label, ranks, cpu_ranks, threads, ...
row=$(awk -F'\t' '$2 == 2 && $3 == 2 && $5 == 0' fit.tsv)
[ -n "$row" ] || { cat fit.tsv; fail "no 2-rank CPU row"; }
label=$(cut -f1 <<< "$row")
threads=$(cut -f4 <<< "$row")

# A run of a predicted placement stores its prediction beside the measured timing.
run_np 2 fit --run.workers cpu example.ini --fit.replicas 200 --run.threads "$threads" --predicted fit.tsv \
    --output.file p.h5 > p.log
/usr/bin/python3 - "$label" <<'PY' || fail "prediction not stored"
import sys, h5py
f = h5py.File("p.h5", "r")
for g in ("/timing", "/timing/runs/0"):
    a = f[g].attrs
    assert a["predicted_wall_seconds"] > 0, dict(a)
    assert a["predicted_placement_matches"] == 1, dict(a)
    label = a["predicted_placement"]
    label = label.decode() if isinstance(label, bytes) else label
    assert label == sys.argv[1], (label, sys.argv[1])
    assert a["runtime_seconds"] > 0
print("stored", f["/timing"].attrs["predicted_wall_seconds"], "measured", f["/timing"].attrs["runtime_seconds"])
PY
"$EF" report p.h5 > report.log
grep -q "predicted .* s (parallel efficiency .*) for $label; measured .* s (.*): error [+-]" report.log ||
    { cat report.log; fail "report does not show predicted vs measured"; }
ok "--predicted stored in /timing and its record; report: $(grep 'predicted' report.log | sed 's/^ *//')"

# A placement the file does not hold: the recommended row, marked, and a warning.
run_np 3 fit --run.workers cpu example.ini --fit.replicas 20 --run.threads 1 --predicted fit.tsv --output.file q.h5 > q.log 2> q.err
grep -q "no row for this run's placement (3 cpu x 1 thread)" q.err || { cat q.err; fail "no warning for an unpredicted placement"; }
"$EF" report q.h5 | grep -q "(not this run's placement)" || fail "report does not mark the mismatch"
ok "an unpredicted placement: warning, recommended row stored and marked"

expect_error 2 "no such file" -- run_np 1 fit example.ini --predicted missing.tsv --output.file r.h5
printf '# x\nplacement\tranks\n1 cpu\tone\n' > bad.tsv  # a header, then a row that is not one
expect_error 3 "bad.tsv:3: not a prediction row" -- run_np 1 fit example.ini --predicted bad.tsv --output.file r.h5
[ ! -e r.h5 ] || fail "a run with a bad prediction file wrote its output"
expect_error 2 "budget" -- "$EF" advise example.ini --budget -1
expect_error 2 "--workers" -- "$EF" advise example.ini --workers tpu
[ "$HAVE_GPU" = 1 ] || expect_error 2 "no GPU is visible" -- "$EF" advise example.ini --workers gpu
expect_error 2 "no such file" -- "$EF" advise missing.ini
