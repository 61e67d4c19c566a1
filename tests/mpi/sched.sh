#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Scheduling: every policy fits every replica once and gives bitwise identical results, with
# rank 1 slowed (--debug.slowdown 1:16) under dynamic, guided and weighted; static's ranks fit
# exactly their blocks. Nothing here depends on how busy the machine is: no timing figure, load
# balance or split of the replicas between ranks under the shared-cursor policies is asserted
# (how many replicas a slowed rank gets depends on the CPU share it gets; load balance and wall
# time per policy are measured by perf/sched.sh policies). How each policy sizes its units
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
# static.h5 (639 replicas) is other work than one.h5 and two.h5 (40): compared only when asked.
"$EF" report two.h5 one.h5 static.h5 --different-work --csv report.csv > report.log
[ "$(wc -l < report.csv)" = 4 ] || { cat report.csv; fail "report.csv should have a header and 3 rows"; }
head -1 report.csv | grep -q "file,ranks,workers,policy,wall_s,speedup" || fail "report.csv header"
[ "$(sed -n 2p report.csv | cut -d, -f2)" = 1 ] || fail "report rows are not sorted by ranks"
[ "$(sed -n 2p report.csv | cut -d, -f6)" = "1.000000" ] || fail "baseline row speedup is not 1"
expect_error 3 "peaks.csv: cannot open as an HDF5 file" -- "$EF" report peaks.csv
ok "report: 3 rows sorted by ranks, CSV written; fit --baseline adds speedup"
# Strong and weak scaling, detected from the fits per rank (one.h5: 41 on 1 rank, two.h5: 41 on 2;
# weak2/weak4: 40 per rank + the central fit), or as asked; the arithmetic checked on the CSV.
run_np 2 fit peaks.ini --fit.replicas 80 --output.file weak2.h5 > weak2.log
run_np 4 fit peaks.ini --fit.replicas 160 --output.file weak4.h5 > weak4.log
"$EF" report weak4.h5 one.h5 weak2.h5 --csv weak.csv > weak.log
grep -q "^cpu ranks: weak scaling (detected: work proportional to the ranks); baseline one.h5" weak.log ||
    { cat weak.log; fail "report does not detect weak scaling"; }
grep -q "^where the time went" weak.log || { cat weak.log; fail "report has no per-phase seconds"; }
"$EF" report two.h5 one.h5 --csv strong.csv > strong.log
grep -q "^cpu ranks: strong scaling (detected: the same total work" strong.log ||
    { cat strong.log; fail "report does not detect strong scaling"; }
"$EF" report weak4.h5 one.h5 weak2.h5 --strong --csv forced.csv > forced.log
grep -q "^cpu ranks: strong scaling (as asked)" forced.log || { cat forced.log; fail "--strong not taken"; }
/usr/bin/python3 - weak.csv strong.csv forced.csv <<'PY' || fail "report's scaling arithmetic"
import csv, sys
def rows(p):
    return list(csv.DictReader(open(p)))
def close(a, b, t1, tn):
    # The CSV prints 6 decimals: wall_s of ~0.05 s is rounded by up to 1e-5 of itself, so a ratio of
    # two of them moves by up to (5e-7/T1 + 5e-7/TN) of itself, and the printed ratio by 5e-7.
    return abs(float(a) - b) <= 2 * (abs(b) * (5e-7 / t1 + 5e-7 / tn) + 5e-7)
for path, want in ((sys.argv[1], "weak"), (sys.argv[2], "strong"), (sys.argv[3], "strong")):
    rs = rows(path)
    assert [int(r["ranks"]) for r in rs] == sorted(int(r["ranks"]) for r in rs), path
    base = rs[0]
    assert base["file"] == "one.h5" and base["baseline"] == "one.h5", (path, base)
    t1 = float(base["wall_s"])
    for r in rs:
        n, tn = float(r["ranks"]), float(r["wall_s"])
        assert r["group"] == "cpu" and r["cpu_ranks"] == r["ranks"] and r["gpu_ranks"] == "0", r
        if n > 1:
            assert r["mode"] == want, (path, r["mode"], want)
        if want == "weak":      # efficiency T1/TN, scaled speedup N T1/TN
            assert close(r["scaling_efficiency"], t1 / tn, t1, tn) and close(r["speedup"], n * t1 / tn, t1, tn), (path, r)
        else:                   # speedup T1/TN, efficiency speedup/N
            assert close(r["speedup"], t1 / tn, t1, tn) and close(r["scaling_efficiency"], t1 / tn / n, t1, tn), (path, r)
        for ph in ("setup", "compute", "io", "sync", "idle", "sched"):
            assert float(r[ph + "_max_s"]) >= float(r[ph + "_mean_s"]) >= 0, (path, ph, r)
    print(path, [(r["ranks"], r["mode"], r["speedup"], r["scaling_efficiency"]) for r in rs])
PY
expect_error 2 "--weak and --strong exclude each other" -- "$EF" report one.h5 two.h5 --weak --strong
ok "report: weak (40 fits per rank) and strong scaling detected or as asked, efficiencies T1/TN and T1/(N TN)"
# GPU and mixed groups on real files: copies whose stored placement says their first ranks drove
# a GPU (this machine has none); the mixed row against the GPU-only run with as many GPUs and
# against its parts' per-rank throughputs (the gpu and cpu groups' baselines).
/usr/bin/python3 - <<'PY' || fail "could not write the GPU-labelled copies"
import shutil, h5py, numpy as np
for src, dst, gpus in (("one.h5", "gpu1.h5", 1), ("two.h5", "gpu2.h5", 2), ("weak4.h5", "mixed.h5", 2)):
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        for g in ["timing"] + ["timing/runs/" + k for k in f["timing/runs"]]:
            old = f[g].attrs["placement"]
            rows = [r.decode() if isinstance(r, bytes) else str(r) for r in old]
            rows = ["\t".join(c[:2] + ([f"gpu {i}: test"] if i < gpus else c[2:3]) + c[3:])
                    for i, c in enumerate(r.split("\t") for r in rows)]
            f[g].attrs.modify("placement", np.array(rows, dtype=old.dtype))
PY
"$EF" report gpu1.h5 gpu2.h5 mixed.h5 one.h5 --csv mixed.csv > mixed.log
grep -q "^gpu ranks: strong scaling (detected" mixed.log && grep -q "^mixed (GPU and CPU ranks)" mixed.log ||
    { cat mixed.log; fail "report: no gpu and mixed groups"; }
/usr/bin/python3 - mixed.csv <<'PY' || { cat mixed.log; fail "report's mixed arithmetic"; }
import csv, sys
rs = {r["file"]: r for r in csv.DictReader(open(sys.argv[1]))}
assert [r["group"] for r in csv.DictReader(open(sys.argv[1]))] == ["gpu", "gpu", "cpu", "mixed"]
thr = lambda r: float(r["items"]) / float(r["wall_s"])
m, g1, g2, c1 = rs["mixed.h5"], rs["gpu1.h5"], rs["gpu2.h5"], rs["one.h5"]
assert m["mode"] == "mixed" and m["gpu_ranks"] == "2" and m["cpu_ranks"] == "2", m
ideal = 2 * thr(g1) + 2 * thr(c1)   # one GPU rank's and one CPU rank's throughput, from the baselines
# wall_s is printed with 6 decimals: each ratio is good to 5e-7 / wall_s of each run in it, 5e-7 printed.
tol = lambda v, *rs: 2 * (abs(v) * sum(5e-7 / float(r["wall_s"]) for r in rs) + 5e-7)
e = thr(m) / ideal
assert abs(float(m["scaling_efficiency"]) - e) <= tol(e, m, g1, c1), (m, ideal)
assert abs(float(m["speedup"]) - thr(m) / thr(g2)) <= tol(thr(m) / thr(g2), m, g2), m
assert g2["baseline"] == "gpu1.h5" and c1["baseline"] == "one.h5", (g2, c1)
print("mixed: efficiency", m["scaling_efficiency"], "speedup vs 2 GPUs alone", m["speedup"])
PY
ok "report: gpu, cpu and mixed groups on real (relabelled) runs; the mixed row against its parts"
# Honest points. Cores, not ranks: 1 rank x 2 threads (t2.h5, unbound) is 2 cores, as two.h5 is.
# Two ranks pinned to one core (taskset -c 0: bind = auto splits a one-core mask, so they share
# it) are marked and left out of the baseline, the mode and the claim: with 60 replicas they
# would make the strong series neither strong nor weak, which --include-shared then refuses.
# Runs of another config (max_iterations) are refused naming both files unless --different-work.
"$MPIEXEC" --oversubscribe --bind-to none -np 1 "$EF" fit peaks.ini --fit.replicas 40 --run.threads 2 \
    --output.file t2.h5 > t2.log
taskset -c 0 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$EF" fit peaks.ini --fit.replicas 60 \
    --output.file shared.h5 > shared.log 2>&1
grep -q "warning: ranks 0, 1 on .* share cores 0 " shared.log || { cat shared.log; fail "no shared-cores warning"; }
run_np 1 fit peaks.ini --fit.replicas 40 --fit.max_iterations 10 --output.file it10.h5 > it10.log
"$EF" report one.h5 two.h5 t2.h5 shared.h5 --csv honest.csv > honest.log || { cat honest.log; fail "report of honest.csv"; }
grep -q '^shared.h5  *2    2\* ' honest.log || { cat honest.log; fail "the shared run is not marked * in the table"; }
grep -q "^  shared.h5: ranks 0, 1 on .* share cores 0 " honest.log && grep -q "left out of the baseline, the mode" honest.log ||
    { cat honest.log; fail "report does not say why shared.h5 is marked"; }
grep -q "^cpu ranks: strong scaling (detected" honest.log && grep -q "^cpu ranks: at 2 cores, strong efficiency .*, t2.h5) of the runs whose ranks had cores of their own" honest.log ||
    { cat honest.log; fail "the shared run was not left out of the mode and the claim"; }
/usr/bin/python3 - honest.csv <<'PY' || { cat honest.log; fail "report's cores arithmetic"; }
import csv, sys
rs = {r["file"]: r for r in csv.DictReader(open(sys.argv[1]))}
assert {f: (r["cores"], r["shared_cores"]) for f, r in rs.items()} == \
    {"one.h5": ("1", "0"), "two.h5": ("2", "0"), "t2.h5": ("2", "0"), "shared.h5": ("2", "1")}, rs
t1 = float(rs["one.h5"]["wall_s"])
for f in ("two.h5", "t2.h5"):   # strong: speedup T1/TN, efficiency speedup / cores (2 for both)
    tn = float(rs[f]["wall_s"])
    e = t1 / tn / 2             # 6 printed decimals: good to 5e-7/T1 + 5e-7/TN of itself, 5e-7 printed
    assert abs(float(rs[f]["scaling_efficiency"]) - e) <= 2 * (e * (5e-7 / t1 + 5e-7 / tn) + 5e-7), rs[f]
PY
expect_error 2 "report: one.h5 and shared.h5 did different work \(41 items on 1 unit\(s\), 61 on 2: neither the same nor proportional" \
    -- "$EF" report one.h5 two.h5 shared.h5 --include-shared
expect_error 2 "report: one.h5 and it10.h5 did different work \(fit.max_iterations = 1000 in one.h5, 10 in it10.h5\).*--different-work" \
    -- "$EF" report one.h5 it10.h5
"$EF" report one.h5 it10.h5 --different-work > diff.log || { cat diff.log; fail "--different-work was refused"; }
ok "report: cores = ranks x threads; a shared-core run marked and left out (--include-shared puts it back); other work refused unless --different-work"
echo "sched: all checks passed"
