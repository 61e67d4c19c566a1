#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The dis-mellin tables are built once per node (issue 35): the ranks of a node share one copy
# in an MPI-3 shared-memory window, each rank computing a slice of its rows; the model line says
# so, and the fit's bits are those of a single rank (LO tables and the qcd:: NLO tables, ranks
# that do not divide the points evenly, one rank of a shared node bound to its own core).
# The Gram path's set-up (T^T, T^T W, f0 and G = T^T W T) takes the same way: one copy per node,
# each rank whole rows / columns of it; the set-up line says so and the replicas' bits are a
# lone rank's (stats2 and the NLO example fit on the Gram path, solver = auto).
source "$(dirname "$0")/../tools/mpi_common.sh"
"$EF" simulate dis --out small.h5 --points 201 --seed 7 --noise 0.03 > sim.log
sed -e 's/^file = dis-mellin-lo.h5/file = small.h5/' "$SRC/inputs/stats2.ini" > small.ini
run_np 1 fit small.ini --fit.replicas 3 --output.file one.h5 > one.log
grep -q "one copy per node" one.log && { cat one.log; fail "a lone rank claims a shared table"; }
grep -q "set-up:" one.log && { cat one.log; fail "a lone rank has a set-up line"; }
# The Gram set-up, as the set-up line reports it for $1 ranks (log $2).
gram_shared() {
    grep -q "^  set-up:   Gram set-up [0-9.]* MB, one copy per node shared by its $1 ranks, each built 1/$1 of the rows" "$2" ||
        { cat "$2"; fail "$1 ranks: the set-up line does not say the Gram set-up is shared"; }
}
for np in 2 3; do
    run_np $np fit small.ini --fit.replicas 3 --output.file n$np.h5 > n$np.log
    grep -q "tables [0-9.]* MB, one copy per node shared by its $np ranks, each built 1/$np of the rows" n$np.log ||
        { cat n$np.log; fail "$np ranks: the model line does not say the tables are shared"; }
    gram_shared $np n$np.log
    [ "$($H5CHECK status n$np.h5)" = "4 0" ] || fail "n$np.h5 incomplete"
    $H5CHECK equal one.h5 n$np.h5 /central /replicas /summary || fail "LO: 1 and $np ranks (shared tables) differ"
    ok "LO tables and Gram set-up built once by $np ranks, shared; bits equal to 1 rank"
done
# A dry run checks as much, and says the same (the worker and its Gram set-up are made).
run_np 2 fit small.ini --dry-run > dry.log
gram_shared 2 dry.log
ok "dry run: the Gram set-up shared by 2 ranks"
# The qcd:: tables (NLO) take the same path.
"$EF" simulate dis --truth "$SRC/inputs/dis-mellin-nlo.ini" --out nlo.h5 --points 101 --seed 5 > simn.log
sed -e 's/^file = dis-mellin-nlo.h5/file = nlo.h5/' "$SRC/inputs/dis-mellin-nlo.ini" > nlo.ini
run_np 1 fit nlo.ini --fit.replicas 2 --output.file nlo1.h5 > nlo1.log
for np in 2 3; do
    run_np $np fit nlo.ini --fit.replicas 2 --output.file nlo$np.h5 > nlo$np.log
    grep -q "tables [0-9.]* MB, one copy per node shared by its $np ranks" nlo$np.log ||
        { cat nlo$np.log; fail "NLO: tables not shared"; }
    gram_shared $np nlo$np.log
    $H5CHECK equal nlo1.h5 nlo$np.h5 /central /replicas /summary || fail "NLO: 1 and $np ranks (shared) differ"
    ok "NLO tables and Gram set-up built once by $np ranks, shared; bits equal to 1 rank"
done
# The QR table path makes no Gram set-up, and says none.
run_np 2 fit small.ini --fit.replicas 2 --fit.solver qr --output.file qr2.h5 > qr2.log
grep -q "set-up:" qr2.log && { cat qr2.log; fail "the QR path claims a Gram set-up"; }
ok "QR path: no Gram set-up line"
# A data error is still one clean line from every rank of the node (validated before the window;
# rows are numbered from 1 in messages: index 5 is row 6).
/usr/bin/python3 - <<'PY'
import h5py
with h5py.File("small.h5", "r") as f, h5py.File("bad.h5", "w") as g:
    for k in f: f.copy(k, g)
    g["Q2"][5] = -1.0
PY
sed -e 's/^file = small.h5/file = bad.h5/' small.ini > bad.ini
expect_error 3 "data row 6: Q2 = -1" -- "$MPIEXEC" --oversubscribe -np 2 "$EF" fit bad.ini --fit.replicas 2 --output.file x.h5
echo "node_tables: all checks passed"
