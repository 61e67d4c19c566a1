#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Placement: each rank's cores are in the placement table and under /timing; with no binding
# from the launcher, [run] bind = auto gives the ranks of a node distinct cores; bind = none
# keeps the shared mask and warns; two ranks forced onto one core are warned about; OMP_PLACES
# and OMP_PROC_BIND without a launcher's binding still give the ranks distinct cores.
source "$(dirname "$0")/../tools/mpi_common.sh"
cp "$SRC/inputs/example.ini" "$SRC/inputs/decay.csv" .
ARGS="--fit.replicas 20"
cores() {  # the stored cores of each rank, one line per rank
    /usr/bin/python3 -c "
import h5py, sys
for row in h5py.File(sys.argv[1], 'r')['/timing'].attrs['placement']:
    row = row.decode() if isinstance(row, bytes) else row
    print(row.split('\t')[4])" "$1"
}
ncpu=$(getconf _NPROCESSORS_ONLN)  # not nproc: it follows OMP_NUM_THREADS
[ "$ncpu" -ge 2 ] || { echo "placement: one CPU only, nothing to place; skipped"; exit 0; }

# No binding from the launcher: auto splits the node's cores.
"$MPIEXEC" --oversubscribe --bind-to none -np 2 "$EF" fit example.ini $ARGS --output.file auto.h5 > auto.log 2> auto.err
mapfile -t c < <(cores auto.h5)
[ "${#c[@]}" = 2 ] && [ "${c[0]}" != "${c[1]}" ] || { cat auto.log; fail "bind = auto: ranks share cores: ${c[*]}"; }
grep -q "share cores" auto.err && { cat auto.err; fail "bind = auto warned about shared cores"; }
ok "bind = auto under mpirun --bind-to none: rank cores ${c[0]} and ${c[1]}"

# OMP_PLACES / OMP_PROC_BIND under a launcher that does not bind: OpenMP pins every rank's main
# thread to its first place (core 0) before main(), and would place every rank's team on places
# 0, 1, ...; the ranks still get disjoint cores, for the main thread and every team thread (the
# table's cores are the union of the team's masks, /proc/self/task/*/status Cpus_allowed_list).
for threads in 1 2; do
    OMP_PLACES=cores OMP_PROC_BIND=close OMP_NUM_THREADS=$threads "$MPIEXEC" --oversubscribe --bind-to none -np 2 \
        "$EF" fit example.ini $ARGS --output.file omp$threads.h5 > omp$threads.log 2> omp$threads.err
    mapfile -t c < <(cores omp$threads.h5)
    [ "${#c[@]}" = 2 ] && [ "${c[0]}" != "${c[1]}" ] || { cat omp$threads.log; fail "OMP_PLACES=cores, $threads thread(s): ranks share cores: ${c[*]}"; }
    grep -q "share cores" omp$threads.err && { cat omp$threads.err; fail "OMP_PLACES=cores: warned about shared cores"; }
    grep -q "omp-close" omp$threads.log || { cat omp$threads.log; fail "OMP_PROC_BIND=close not shown"; }
    $H5CHECK equal auto.h5 omp$threads.h5 /replicas || fail "OMP_PLACES changed the bits"
    ok "OMP_PLACES=cores OMP_PROC_BIND=close, $threads thread(s) per rank, no launcher binding: cores ${c[0]} and ${c[1]}"
done

# bind = none: today's behaviour (one shared mask), with a warning naming the ranks.
"$MPIEXEC" --oversubscribe --bind-to none -np 2 "$EF" fit example.ini $ARGS --run.bind none --output.file none.h5 \
    > none.log 2> none.err
mapfile -t c < <(cores none.h5)
[ "${c[0]}" = "${c[1]}" ] || fail "bind = none changed the launcher's masks: ${c[*]}"
grep -q "warning: ranks 0, 1 on .* share cores" none.err || { cat none.err; fail "no warning for shared cores"; }
ok "bind = none: shared mask ${c[0]} kept, warned"

# Two ranks forced onto one core (the whole job's mask is one CPU): warned whatever bind says.
taskset -c 0 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$EF" fit example.ini $ARGS --output.file one.h5 \
    > one.log 2> one.err
mapfile -t c < <(cores one.h5)
[ "${c[0]}" = 0 ] && [ "${c[1]}" = 0 ] || fail "taskset -c 0: cores ${c[*]}"
grep -q "warning: ranks 0, 1 on .* share cores 0" one.err || { cat one.err; fail "no warning for one core"; }
ok "two ranks on one core: warned"

# A launcher's binding is kept (OpenMPI binds 2 ranks to cores by default).
"$MPIEXEC" --bind-to core -np 2 "$EF" fit example.ini $ARGS --output.file launcher.h5 > launcher.log 2>&1
grep -q "launcher" launcher.log || { cat launcher.log; fail "the launcher's binding was not kept"; }
mapfile -t c < <(cores launcher.h5)
[ "${c[0]}" != "${c[1]}" ] || fail "launcher binding: ranks share cores"
ok "launcher binding kept: cores ${c[0]} and ${c[1]}"
# Where a rank's set of cores came from, in the placement line: a mask narrower than the node's
# (taskset) is "of affinity"; a cgroup whose cpuset holds one CPU is "of cgroup v1/v2 cpuset
# PATH" (Linux also narrows the mask to it: the line names the cgroup as the reason).
last=$((ncpu - 1))
taskset -c "$last" "$MPIEXEC" --oversubscribe --bind-to none -np 1 "$EF" fit example.ini $ARGS --output.file ts.h5 > ts.log 2>&1
[ "$(cores ts.h5)" = "$last" ] || { cat ts.log; fail "taskset -c $last: cores $(cores ts.h5)"; }
grep -q "^  0 .* $last  *launcher of affinity, free" ts.log || { cat ts.log; fail "taskset: the placement line does not say 'of affinity'"; }
ok "taskset -c $last: core $last, 'launcher of affinity' in the placement line"
# make_cgroup CPU: a cgroup whose cpuset is CPU (v2 where the cpuset controller is there, else
# v1), its folder in $CG and the file to move a process in in $CG_PROCS; false where it cannot be made.
CG=
make_cgroup() {
    local v2=/sys/fs/cgroup
    [ "$(id -u)" = 0 ] || return 1
    if grep -qw cpuset $v2/cgroup.controllers 2> /dev/null; then
        grep -qw cpuset $v2/cgroup.subtree_control || echo +cpuset > $v2/cgroup.subtree_control 2> /dev/null || return 1
        CG=$v2/ef-test-$$ && mkdir "$CG" && echo "$1" > "$CG/cpuset.cpus" && CG_PROCS=$CG/cgroup.procs && return 0
    elif [ -d $v2/cpuset ] && [ -w $v2/cpuset ]; then
        CG=$v2/cpuset/ef-test-$$ && mkdir "$CG" && echo "$1" > "$CG/cpuset.cpus" &&
            cat $v2/cpuset/cpuset.mems > "$CG/cpuset.mems" && CG_PROCS=$CG/tasks && return 0
    fi
    return 1
}
if make_cgroup "$last"; then
    trap 'rm -rf "$WORK"; rmdir "$CG" 2> /dev/null' EXIT
    sh -c 'echo $$ > "$1"; shift; exec "$@"' sh "$CG_PROCS" "$MPIEXEC" --oversubscribe --bind-to none -np 1 "$EF" fit \
        example.ini $ARGS --output.file cg.h5 > cg.log 2>&1 || { cat cg.log; fail "run in cgroup $CG"; }
    [ "$(cores cg.h5)" = "$last" ] || { cat cg.log; fail "cgroup cpuset $last: cores $(cores cg.h5)"; }
    grep -q "^  0 .* $last  *launcher of cgroup v[12] cpuset /\(.*/\)\?ef-test-$$, free" cg.log ||
        { cat cg.log; fail "cgroup: the placement line does not name the cgroup's cpuset"; }
    $H5CHECK equal auto.h5 cg.h5 /replicas || fail "the cgroup changed the bits"
    ok "cgroup $CG with cpuset $last: core $last, the placement line names the cgroup"
else
    echo "placement: skip - no cgroup with a restricted cpuset could be made here (needs root and a writable cpuset controller under /sys/fs/cgroup)"
fi
echo "placement: all checks passed"
