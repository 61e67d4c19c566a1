#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Graceful stop before a wall-time limit (issue 20) and reconstruction checkpoints (issue 25).
# What a user sees under mpirun: SIGUSR1 to mpirun (Open MPI forwards it to every rank; Slurm's
# --signal=B:USR1@T reaches the batch shell, which forwards it to mpirun) stops a 2-rank fit at
# a unit boundary and a 2-rank reconstruction at an iteration boundary within 10 s, with exit
# code 75 and the command that resumes; that command finishes the run bitwise equal to an
# uninterrupted one. A signal that reaches one rank only (SIGTERM to rank 1, as srun's time
# limit sends it to the tasks) stops every rank too. kill -9 of a reconstruction between
# checkpoints, then --resume: bitwise equal (the checkpoint is replaced atomically). A resume
# with another config or other data is refused with one line and the file untouched.
# No timing is asserted except the issue's generous 10 s bound; every wait has a 60 s guard.
source "$(dirname "$0")/../tools/mpi_common.sh"
export HDF5_USE_FILE_LOCKING=FALSE  # the tests read outputs while a run writes them

# wait_exit PID: waits for the background job PID (60 s guard: a hang fails the test, never
# blocks it); sets RC to its exit code and WAITED to the seconds it took.
wait_exit() {
    local pid=$1 t0 i
    t0=$(date +%s.%N)
    for i in $(seq 1 600); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        for c in $(pgrep -P "$pid"); do kill -9 "$c" 2>/dev/null || true; done
        kill -9 "$pid" 2>/dev/null || true
        fail "the run did not end within 60 s of the stop signal (hang)"
    fi
    RC=0
    wait "$pid" || RC=$?
    WAITED=$(/usr/bin/python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
}

# rank_pid LAUNCHER_PID RANK: the pid of that rank among mpirun's children.
rank_pid() {
    local c
    for c in $(pgrep -P "$1"); do
        tr '\0' '\n' < "/proc/$c/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$c"; return; }
    done
}

# check_stopped LOG EXPECTED_COMMAND: exit 75 within 10 s, one notice with the resume command.
check_stopped() {
    [ "$RC" = 75 ] || { cat "$1" >&2; fail "exit code $RC after the stop signal, wanted 75"; }
    /usr/bin/python3 -c "import sys; sys.exit(0 if $WAITED <= 10 else 1)" ||
        fail "the run took ${WAITED} s to stop (the bound is 10 s)"
    [ "$(grep -c '^ensemblefit: stopped on' "$1")" = 1 ] || { cat "$1" >&2; fail "no single 'stopped on' notice"; }
    RESUME=$(grep -A1 '^ensemblefit: stopped on' "$1" | tail -1 | sed 's/^  //')
    [ "$RESUME" = "$2" ] || fail "resume command '$RESUME', wanted '$2'"
    ok "stopped in ${WAITED} s, exit 75: $(grep '^ensemblefit: stopped on' "$1")"
}

# ---- fit: SIGUSR1 to mpirun -------------------------------------------------------------------
write_peaks_problem 4000 150 1 full.h5
run_np 2 fit peaks.ini > full.log
"$MPIEXEC" --oversubscribe -np 2 "$EF" fit peaks.ini --output.file stop.h5 --overwrite \
    --debug.slowdown 0:20,1:20 > stop.out 2> stop.log &
pid=$!
for _ in $(seq 1 600); do  # until a few replicas are on disk
    sleep 0.1
    [ -e stop.h5 ] || continue
    read -r done left < <($H5CHECK status stop.h5 2>/dev/null || echo "0 0")
    [ "${done:-0}" -ge 4 ] && break
done
kill -USR1 $pid
wait_exit $pid
check_stopped stop.log "$EF fit peaks.ini --output.file stop.h5 --debug.slowdown 0:20,1:20 --resume"
read -r done left < <($H5CHECK status stop.h5)
[ "$left" -gt 0 ] || fail "the fit finished before the signal; the test proves nothing"
grep -q "$done of 151 replica fits written to stop.h5" stop.log || { cat stop.log; fail "the notice's count"; }
# The printed command, as printed (plus a later --debug.slowdown that undoes the slowdown).
eval "run_np 2 ${RESUME#"$EF "} --debug.slowdown 0:1" > resumed.log || { cat resumed.log; fail "resume"; }
grep -q "resume: $left of 151 replica fits left" resumed.log || { cat resumed.log; fail "resume count"; }
$H5CHECK equal full.h5 stop.h5 /central /replicas /summary || fail "resumed fit differs from the uninterrupted run"
ok "fit stopped at $done/151, resumed with the printed command: bitwise equal"

# ---- fit: SIGTERM to rank 1 only (srun's way); rank 0 learns it from rank 1's next request ----
"$MPIEXEC" --oversubscribe -np 2 "$EF" fit peaks.ini --output.file term.h5 --debug.slowdown 0:20,1:20 \
    > term.out 2> term.log &
pid=$!
for _ in $(seq 1 600); do
    sleep 0.1
    [ -e term.h5 ] || continue
    read -r done left < <($H5CHECK status term.h5 2>/dev/null || echo "0 0")
    [ "${done:-0}" -ge 2 ] && break
done
r1=$(rank_pid $pid 1)
[ -n "$r1" ] || fail "rank 1's process not found"
kill -TERM "$r1"
wait_exit $pid
check_stopped term.log "$EF fit peaks.ini --output.file term.h5 --debug.slowdown 0:20,1:20 --resume"
grep -q "stopped on SIGTERM" term.log || fail "rank 0 does not name rank 1's signal"
run_np 1 fit peaks.ini --output.file term.h5 --resume > term_resumed.log || { cat term_resumed.log; fail "resume"; }
$H5CHECK equal full.h5 term.h5 /central /replicas /summary || fail "resumed fit (SIGTERM) differs"
ok "SIGTERM to rank 1 only: every rank stopped; resumed on 1 rank: bitwise equal"

# ---- reconstruction --------------------------------------------------------------------------
"$EF" simulate ptycho --out sim.h5 --scan 16 --dp 32 --modes 2 --dose 1e6 --seed 3 > sim.log
"$EF" simulate ptycho --out other.h5 --scan 16 --dp 32 --modes 2 --dose 1e6 --seed 4 > sim2.log
# Position correction and a decaying rate: the checkpoint must carry positions, their moments
# and the step counts; equal shares so the run itself is reproducible to the bit.
cat > recon.ini <<'INI'
[data]
file = sim.h5
[model]
modes = 2
[object]
lr_amplitude = 5e-3
lr_phase = 5e-3
[probe]
lr = 0.03
start = 2
[positions]
correct = true
start = 3
[solver]
iterations = 60
batch_size = 32
seed = 11
decay_start = 20
[run]
balance = equal
[output]
file = full_recon.h5
report_every = 1
previews = false
INI
run_np 2 reconstruct recon.ini > full_recon.log || { cat full_recon.log; fail "uninterrupted reconstruction"; }

# wait_iteration LOG K: until LOG's progress shows iteration K (60 s guard).
wait_iteration() {
    for _ in $(seq 1 600); do
        awk -v k="$2" 'NF >= 3 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9.e+-]+$/ && $1 + 0 >= k { found = 1 }
                       END { exit !found }' "$1" 2>/dev/null && return
        sleep 0.1
    done
    fail "no iteration $2 in $1 after 60 s"
}

"$MPIEXEC" --oversubscribe -np 2 "$EF" reconstruct recon.ini --output.file stop_recon.h5 > stop_recon.out \
    2> stop_recon.log &
pid=$!
wait_iteration stop_recon.out 2
kill -USR1 $pid
wait_exit $pid
check_stopped stop_recon.log "$EF reconstruct recon.ini --output.file stop_recon.h5 --resume"
at=$($H5CHECK get stop_recon.h5 /checkpoint iteration)
[ "$at" -lt 60 ] || fail "the checkpoint is at iteration $at"
grep -q "a checkpoint at iteration $at of 60 written to stop_recon.h5" stop_recon.log || fail "the notice's iteration"
[ ! -e stop_recon.h5.creating ] || fail "a partial output was left behind"

# Refused resumes leave the checkpoint byte for byte: another setting, other data.
sum=$(md5sum < stop_recon.h5)
expect_error 2 "solver.seed = 12, but stop_recon.h5 was computed with solver.seed = 11" -- \
    run_np 2 reconstruct recon.ini --output.file stop_recon.h5 --resume --solver.seed 12
expect_error 2 "stop_recon.h5: its checkpoint was computed from other" -- \
    run_np 2 reconstruct recon.ini --output.file stop_recon.h5 --resume --data.file other.h5
[ "$(md5sum < stop_recon.h5)" = "$sum" ] || fail "a refused resume changed the checkpoint"

eval "run_np 2 ${RESUME#"$EF "}" > resumed_recon.log || { cat resumed_recon.log; fail "reconstruction resume"; }
grep -q "resume: from the checkpoint at iteration $at of 60" resumed_recon.log || fail "resume line"
$H5CHECK equal full_recon.h5 stop_recon.h5 /object /probe /loss /positions /probe_mode_powers ||
    fail "resumed reconstruction differs from the uninterrupted run"
ok "reconstruction stopped at iteration $at/60, resumed with the printed command: bitwise equal"
sum=$(md5sum < stop_recon.h5)
run_np 2 reconstruct recon.ini --output.file stop_recon.h5 --resume > noop.log
grep -q "is a finished reconstruction; nothing to do" noop.log || { cat noop.log; fail "no-op resume"; }
[ "$(md5sum < stop_recon.h5)" = "$sum" ] || fail "a --resume of a finished output changed it"

# ---- reconstruction: SIGTERM to rank 1 only, then kill -9 after a later checkpoint ------------
"$MPIEXEC" --oversubscribe -np 2 "$EF" reconstruct recon.ini --output.file killed.h5 --output.checkpoint_every 2 \
    > killed.out 2> killed.log &
pid=$!
wait_iteration killed.out 3
r1=$(rank_pid $pid 1)
[ -n "$r1" ] || fail "rank 1's process not found"
kill -TERM "$r1"
wait_exit $pid
check_stopped killed.log "$EF reconstruct recon.ini --output.file killed.h5 --output.checkpoint_every 2 --resume"
grep -q "stopped on SIGTERM" killed.log || fail "rank 0 does not name rank 1's signal"
first=$($H5CHECK get killed.h5 /checkpoint iteration)
"$MPIEXEC" --oversubscribe -np 2 "$EF" reconstruct recon.ini --output.file killed.h5 --output.checkpoint_every 2 \
    --resume > killed2.out 2> killed2.log &
pid=$!
wait_iteration killed2.out $((first + 5))  # at least two checkpoints past the first
for c in $(pgrep -P $pid); do kill -9 "$c" 2>/dev/null || true; done
kill -9 $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
at=$($H5CHECK get killed.h5 /checkpoint iteration) || fail "the output is unreadable after kill -9"
[ "$at" -gt "$first" ] && [ "$at" -lt 60 ] || fail "checkpoint at $at after kill -9 (first stop at $first)"
run_np 1 reconstruct recon.ini --output.file killed.h5 --output.checkpoint_every 2 --resume > killed3.log ||
    { cat killed3.log; fail "resume after kill -9"; }
$H5CHECK equal full_recon.h5 killed.h5 /object /probe /loss /positions /probe_mode_powers ||
    fail "reconstruction resumed after kill -9 differs from the uninterrupted run"
ok "SIGTERM to rank 1 at iteration $first, kill -9 after the checkpoint at $at, resumed on 1 rank: bitwise equal"
