#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Scheduling: every policy fits every replica once and gives bitwise identical results, with
# rank 1 slowed (--debug.slowdown 1:16) under dynamic, guided and weighted; static's ranks fit
# exactly their blocks. Nothing here depends on how busy the machine is: no timing figure, load
# balance or split of the replicas between ranks under the shared-cursor policies is asserted
# (how many replicas a slowed rank gets depends on the CPU share it gets; load balance and wall
# time per policy are measured by perf/sched/bench_policies.sh). How each policy sizes its units
# given the ranks' recorded throughputs is checked in tests/unit/test_work_queue.cpp.
source "$(dirname "$0")/../tools/mpi_common.sh"
write_peaks_problem 1000 639 2 peaks.h5
pending=640  # replicas 1..639 and the central fit
lb() { $H5CHECK get "$1" /timing load_balance; }
# static as the reference, without slowdown (its blocks do not depend on speed).
run_np 4 fit peaks.ini --policy static --output.file static.h5 > static.log
for p in dynamic guided weighted; do
    run_np 4 fit peaks.ini --policy $p --output.file $p.h5 --debug.slowdown 1:16 > $p.log
done
for p in static dynamic guided weighted; do
    grep -q "policy $p" $p.log || fail "$p.log does not name the policy"
    [ "$($H5CHECK status $p.h5)" = "$pending 0" ] || fail "$p: not every replica fitted"
    echo "policy $p: load balance $(lb $p.h5) (not checked)"
done
for p in dynamic guided weighted; do
    $H5CHECK equal static.h5 $p.h5 /central /replicas /summary || fail "$p differs from static"
done
ok "static, dynamic, guided, weighted: bitwise identical /central, /replicas, /summary"
/usr/bin/python3 - $pending static.h5 dynamic.h5 guided.h5 weighted.h5 <<'PY' || fail "timing records"
import sys, h5py
pending = int(sys.argv[1])
for f in sys.argv[2:]:
    with h5py.File(f, "r") as h:
        t = h["/timing"]
        # Every rank's phases add up to its wall time (within 1 %).
        phases = ["setup", "compute", "comm", "sync", "sched", "idle", "io"]
        total = sum(t[p][()] for p in phases)
        wall = t["wall"][()]
        assert (abs(total - wall) <= 0.01 * wall).all(), (f, total, wall)
        reps = [int(x) for x in t["replicas"][()]]
        print(f, "replicas per rank", reps, "units per rank", list(t["units"][()]))
        assert sum(reps) == pending, (f, reps)  # each replica handed out once
        if f == "static.h5":  # rank r owns [M r/P, M (r+1)/P), whatever its speed
            assert reps == [pending * (r + 1) // 4 - pending * r // 4 for r in range(4)], (f, reps)
PY
ok "every policy: phases add up to the wall time, $pending replicas handed out once; static's ranks fit their blocks"
for p in static dynamic guided weighted; do
    test -s $p.h5.timing.json || fail "$p: no JSON timing sidecar"
    /usr/bin/python3 -c "import json,sys; d=json.load(open('$p.h5.timing.json')); assert d['ranks']==4 and len(d['per_rank'])==4" \
        || fail "$p: JSON sidecar malformed"
done
ok "JSON sidecars have 4 ranks"
# Scaling-study report: one row per run, CSV for plotting; --baseline on a fit.
run_np 1 fit peaks.ini --fit.replicas 40 --output.file one.h5 > one.log
run_np 2 fit peaks.ini --fit.replicas 40 --output.file two.h5 --baseline one.h5 > two.log
grep -q "vs baseline: speedup" two.log || fail "fit --baseline printed no speedup"
$H5CHECK get two.h5 /timing computation_scalability > /dev/null || fail "no computation_scalability"
"$EF" report two.h5 one.h5 static.h5 --csv report.csv > report.log
[ "$(wc -l < report.csv)" = 4 ] || { cat report.csv; fail "report.csv should have a header and 3 rows"; }
head -1 report.csv | grep -q "file,ranks,workers,policy,wall_s,speedup" || fail "report.csv header"
[ "$(sed -n 2p report.csv | cut -d, -f2)" = 1 ] || fail "report rows are not sorted by ranks"
[ "$(sed -n 2p report.csv | cut -d, -f6)" = "1.000000" ] || fail "baseline row speedup is not 1"
expect_error 3 "peaks.csv: cannot open as an HDF5 file" -- "$EF" report peaks.csv
ok "report: 3 rows sorted by ranks, CSV written; fit --baseline adds speedup"
echo "sched: all checks passed"
