#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Collective failure detection: a failure on one rank only (a data file missing on one node)
# ends every rank with one line naming that rank and its host, and the input error's exit code;
# a rank that stops answering (SIGSTOP) is reported after [run] heartbeat_timeout with exit 4,
# and the file it leaves is finished by --resume, bitwise equal to an uninterrupted run.
# Every run is bounded by `timeout 120`: a hang fails the test (exit 124) instead of stalling it.
source "$(dirname "$0")/../tools/mpi_common.sh"

# bounded NP ARGS...: mpirun under a time limit
bounded() { local np=$1; shift; timeout 120 "$MPIEXEC" --oversubscribe -np "$np" "$@"; }
# on_rank1 NP ARGS-FOR-RANK-0 -- ARGS-FOR-RANK-1: each rank's own command line, as a
# node-local path would make it (sh -c picks by OMPI_COMM_WORLD_RANK, then execs the program).
per_rank() {
    local np=$1 a=$2 b=$3; shift 3
    bounded "$np" sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then x=$2; else x=$1; fi; shift 2
                        exec "$0" "$@" $x' "$EF" "$a" "$b" "$@"
}

write_line_problem

# --- a data file missing on rank 1 only: every rank ends, one line naming rank 1 ------------
# The same file missing on every rank is a config error (one line, no rank: every rank saw it).
expect_error 2 "^ensemblefit: error: [^ ]*data.file: cannot open data file 'absent.csv'" -- \
    bounded 2 "$EF" fit good.ini --data.file absent.csv
expect_error 2 "error: rank 1 \([^)]+\): .*data.file: cannot open data file 'absent.csv'" -- \
    per_rank 2 "--data.file=data.csv" "--data.file=absent.csv" fit good.ini
[ ! -e out.h5 ] || fail "a run that failed in set-up left out.h5 behind"
# the same in a 3-rank run, and with the config file itself missing on rank 1
expect_error 2 "error: rank 1 \([^)]+\): .*cannot open data file 'absent.csv'" -- \
    per_rank 3 "--data.file=data.csv" "--data.file=absent.csv" fit good.ini
cp good.ini only0.ini
expect_error 2 "error: rank 1 \([^)]+\): .*nope.ini" -- per_rank 2 only0.ini nope.ini fit
# an error rank 0 alone checks (the output) reads as in a one-rank run
run_np 2 fit good.ini > good.log
expect_error 2 "^ensemblefit: error: good.ini:[0-9]+: output.file: 'out.h5' exists; pass --resume" -- \
    bounded 2 "$EF" fit good.ini

# --- [run] heartbeat_timeout is validated ----------------------------------------------------
expect_error 2 "run.heartbeat_timeout: must be seconds in 0..1e6" -- \
    bounded 1 "$EF" fit good.ini --run.heartbeat_timeout -1 --output.file hb.h5
expect_error 2 "run.heartbeat_timeout" -- bounded 1 "$EF" fit good.ini --run.heartbeat_timeout abc --output.file hb.h5

# --- a rank stopped with SIGSTOP: rank 0 reports it, exit 4, the file resumes bitwise ---------
write_peaks_problem 4000 150 1 full.h5
run_np 2 fit peaks.ini > full.log
# stopped RANK OUT: a slowed 2-rank run, RANK stopped once some fits are on disk; the run must
# end by itself (exit 4) within the bound, and the stopped process must be gone.
stopped() {
    local rank=$1 out=$2 rc=0
    rm -f pid.0 pid.1
    bounded 2 sh -c 'echo $$ > pid.$OMPI_COMM_WORLD_RANK; exec "$0" "$@"' "$EF" fit peaks.ini \
        --output.file "$out" --debug.slowdown 0:5,1:5 --run.heartbeat_timeout 5 > stop.log 2>&1 &
    local pid=$!
    for _ in $(seq 1 600); do
        sleep 0.1
        if [ -e "$out" ] && [ -e pid.1 ]; then
            read -r done left < <(HDF5_USE_FILE_LOCKING=FALSE $H5CHECK status "$out" 2>/dev/null || echo "0 0")
            [ "${done:-0}" -ge 4 ] && break
        fi
    done
    local victim
    victim=$(cat pid.$rank)
    kill -STOP "$victim"
    wait $pid || rc=$?
    for _ in $(seq 1 100); do kill -0 "$victim" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$victim" 2>/dev/null; then
        ps -o pid,stat,cmd -p "$victim" >&2
        kill -9 "$victim"
        fail "the stopped rank $rank was left behind"
    fi
    [ "$rc" = 4 ] || { cat stop.log >&2; fail "rank $rank stopped: exit $rc, wanted 4 (124: a hang)"; }
    [ "$(grep -c '^ensemblefit: error:' stop.log)" = 1 ] || { cat stop.log >&2; fail "wanted one error line"; }
    grep -E -q "^ensemblefit: error: rank $rank \([^)]+\) has not been heard from for [0-9]+ s .*heartbeat_timeout = 5 s" stop.log ||
        { cat stop.log >&2; fail "the line does not name rank $rank"; }
    ok "rank $rank stopped: $(grep '^ensemblefit: error:' stop.log)"
    read -r done left < <($H5CHECK status "$out")
    [ "$left" -gt 0 ] || fail "the run finished before rank $rank was stopped; the test proves nothing"
    run_np 2 fit peaks.ini --output.file "$out" --resume > resumed.log
    $H5CHECK equal full.h5 "$out" /central /replicas /summary || fail "resumed file differs from the uninterrupted run"
    ok "stopped at $done/151, --resume: bitwise equal to the uninterrupted run"
}
stopped 1 stop1.h5   # rank 0's dispatcher sees rank 1 silent while it holds a unit
stopped 0 stop0.h5   # rank 1 waits for rank 0's answer in vain

# --- the same for a reconstruction: set-up agreed, a stopped rank reported at a batch barrier --
# (one probe mode, not the default 4: the first checkpoint must come within the wait below)
"$EF" simulate ptycho --out sim.h5 --scan 12 --dp 64 --dose 1e6 --seed 3 > sim.log
cat > recon.ini <<'INI'
[data]
file = sim.h5
[model]
modes = 1
[solver]
iterations = 100000
batch_size = 16
[output]
file = recon.h5
checkpoint_every = 10
previews = false
INI
expect_error 2 "error: rank 1 \([^)]+\): .*data.file: no such file 'absent.h5'" -- \
    per_rank 2 "--data.file=sim.h5" "--data.file=absent.h5" reconstruct recon.ini
expect_error 2 "run.heartbeat_timeout: must be seconds in 0..1e6" -- \
    bounded 1 "$EF" reconstruct recon.ini --run.heartbeat_timeout -3
# recon_stopped RANK: a long 2-rank reconstruction, RANK stopped once a checkpoint is written.
recon_stopped() {
    local rank=$1 rc=0
    rm -f pid.0 pid.1 recon.h5
    bounded 2 sh -c 'echo $$ > pid.$OMPI_COMM_WORLD_RANK; exec "$0" "$@"' "$EF" reconstruct recon.ini \
        --run.heartbeat_timeout 4 > rstop.log 2>&1 &
    local pid=$!
    for _ in $(seq 1 600); do
        sleep 0.1
        [ -e recon.h5 ] && [ -e pid.1 ] && break
    done
    sleep 1
    local victim
    victim=$(cat pid.$rank)
    kill -STOP "$victim"
    wait $pid || rc=$?
    for _ in $(seq 1 100); do kill -0 "$victim" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$victim" 2>/dev/null; then kill -9 "$victim"; fail "the stopped rank $rank was left behind"; fi
    [ "$rc" = 4 ] || { cat rstop.log >&2; fail "reconstruction, rank $rank stopped: exit $rc, wanted 4 (124: a hang)"; }
    [ "$(grep -c '^ensemblefit: error:' rstop.log)" = 1 ] || { cat rstop.log >&2; fail "wanted one error line"; }
    grep -E -q "^ensemblefit: error: rank $rank \([^)]+\) has not been heard from for [0-9]+ s while the others wait for it" rstop.log ||
        { cat rstop.log >&2; fail "the line does not name rank $rank"; }
    $H5CHECK get recon.h5 /object > /dev/null || fail "the last checkpoint is not readable"
    ok "reconstruction, rank $rank stopped: $(grep '^ensemblefit: error:' rstop.log); checkpoint kept"
}
recon_stopped 1
recon_stopped 0
