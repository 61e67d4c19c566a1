#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Named threads (issue #40): top -H, ps -L and profilers tell ensemblefit's threads apart. While a
# slowed 2-rank fit runs, /proc/PID/task/*/comm of rank 0 holds ef-dispatch (the unit
# dispatcher), ef-writer (the results writer) and ef-omp-1 (its second OpenMP thread), the
# other rank ef-omp-1; the main thread of each keeps the process's name, ensemblefit.
source "$(dirname "$0")/../tools/mpi_common.sh"
cp "$SRC/inputs/example.ini" "$SRC/inputs/decay.csv" .

# names PID: the sorted thread names of one process
names() { cat /proc/"$1"/task/*/comm 2>/dev/null | sort | tr '\n' ' '; }

setsid bash -c "exec $MPIEXEC --oversubscribe -np 2 $EF fit example.ini --fit.replicas 400 --fit.chunk 2 \
    --run.threads 2 --output.file names.h5 --debug.slowdown 0:200,1:200 --debug.slow-writes 1" > run.log 2>&1 &
pid=$!
seen=
for _ in $(seq 1 400); do
    sleep 0.05
    kill -0 "$pid" 2>/dev/null || break
    ranks=$(pgrep -P "$pid" -x ensemblefit || true)
    all=
    for r in $ranks; do all="$all[$(names "$r")]"; done
    if [[ "$all" == *ef-dispatch* && "$all" == *ef-writer* && $(grep -o ef-omp-1 <<< "$all" | wc -l) -ge 2 ]]; then
        seen=$all
        break
    fi
done
pgrep -P "$pid" | xargs -r kill -9 2>/dev/null || true
kill -9 "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
[ -n "$seen" ] || { cat run.log; fail "thread names not seen; last: ${all:-no ranks}"; }
echo "threads per rank: $seen"
[[ "$seen" == *ensemblefit* ]] || fail "a main thread lost the process's name"
ok "ef-dispatch, ef-writer and ef-omp-1 on every rank, the main threads named ensemblefit"
