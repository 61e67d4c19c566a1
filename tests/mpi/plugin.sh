#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Model plugins: the package installed into a temporary prefix, examples/plugin built against it
# with find_package(ensemblefit) + ensemblefit_add_model(), then fitted on 1 and 3 ranks on the
# qr path and the normal path in double and float: every replica's parameters, chi^2, status and
# iterations must have the bits of the same model header compiled into plugin_reference (this
# build, run through the LM paths directly); the built-in gaussian2d's formula as a plugin must
# give gaussian2d's bits; shards of a plugin fit merge into one run's file. Then the four ways a plugin can be wrong, each one
# error line and exit 2: a missing file, a library without the entry point, a wrong ABI
# version, parameter names that do not match the [param.*] sections.
source "$(dirname "$0")/../tools/mpi_common.sh"
BUILD=${EF_BUILD_DIR:?EF_BUILD_DIR must point at the build tree}
REF=$BUILD/tests/plugin_reference
test -x "$REF" || fail "no $REF (built with the tests)"

cmake --install "$BUILD" --prefix "$WORK/prefix" > install.log
test -f prefix/include/ensemblefit/model/model_plugin.hpp || fail "model_plugin.hpp not installed"
test -f prefix/include/ensemblefit/kernels/plugin/model_plugin_entry.hpp || fail "plugin entry header not installed"
test -f prefix/lib/cmake/ensemblefit/ensemblefitModelPlugin.cmake || fail "ensemblefit_add_model not installed"
# Nothing private: no src/ header and no backend source in the installed tree; the only CUDA
# headers are the ones a plugin's GPU kernels compile (the shared solver kernels and their entry).
test -f prefix/include/ensemblefit/kernels/plugin/model_plugin_gpu.cuh || fail "plugin GPU header not installed"
leaked=$(cd prefix/include && find . -path '*src/*' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \
         ! -path './ensemblefit/kernels/cuda/replica_kernels.cuh' ! -path './ensemblefit/kernels/plugin/model_plugin_gpu.cuh' | head -3)
[ -z "$leaked" ] || fail "private files installed: $leaked"

# The example project, copied out of the source tree so that only the installed headers serve it.
cp -r "$SRC/examples/plugin" example
rm -rf example/build
cmake -S example -B example/build -DCMAKE_PREFIX_PATH="$WORK/prefix" > example.log 2>&1 || { cat example.log; fail "configure examples/plugin"; }
cmake --build example/build > example-build.log 2>&1 || { cat example-build.log; fail "build examples/plugin"; }
PLUGIN=$WORK/example/build/libmichaelis_menten.so
test -f "$PLUGIN" || fail "no $PLUGIN"
nm -D --defined-only "$PLUGIN" | grep -q ' ensemblefit_model_plugin$' || fail "the plugin does not export its entry"
ok "examples/plugin built against the installed package: $(basename "$PLUGIN")"

# dump FILE.h5: the reference's format: replica 0 (/central), then /replicas in replica order,
# then replica 0's covariance.
dump() {
    /usr/bin/python3 - "$1" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    c = {k: f["/central/" + k][()] for k in ("params", "chi2", "status", "iterations", "covariance")}
    print(0, *[float(v).hex() for v in np.ravel(c["params"])], float(c["chi2"]).hex(), int(c["status"]), int(c["iterations"]))
    idx = f["/replicas/index"][()]
    p, chi2 = f["/replicas/params"][()], f["/replicas/chi2"][()]
    s, it = f["/replicas/status"][()], f["/replicas/iterations"][()]
    for t in np.argsort(idx, kind="stable"):
        print(int(idx[t]), *[float(v).hex() for v in p[t]], float(chi2[t]).hex(), int(s[t]), int(it[t]))
    print("cov", *[float(v).hex() for v in np.ravel(c["covariance"])])
PY
}
# printf's %a and Python's float.hex() spell the same double differently: compare as numbers.
same_bits() {
    /usr/bin/python3 - "$1" "$2" <<'PY'
import sys
def value(tok):
    try:
        return int(tok)
    except ValueError:
        return tok if tok == "cov" else float.fromhex(tok)
def rows(path):
    return [[value(t) for t in line.split()] for line in open(path)]
a, b = rows(sys.argv[1]), rows(sys.argv[2])
bad = [x[0] for x, y in zip(a, b) if x != y]
if len(a) != len(b) or bad:
    print(f"{len(a)} vs {len(b)} rows; replicas differing: {bad[:5]}")
    sys.exit(1)
PY
}

CFG=example/michaelis_menten.ini
for solver in qr normal float; do
    extra=()
    [ "$solver" = normal ] && extra=(--fit.solver=normal)
    [ "$solver" = float ] && extra=(--fit.precision=float)
    "$REF" "$CFG" --model.plugin="$PLUGIN" "${extra[@]}" > ref-$solver.txt || fail "plugin_reference ($solver)"
    [ "$(wc -l < ref-$solver.txt)" = 202 ] || fail "reference has $(wc -l < ref-$solver.txt) rows"
    for np in 1 3; do
        run_np "$np" fit "$CFG" --model.plugin="$PLUGIN" --output.file="$WORK/$solver-$np.h5" "${extra[@]}" \
            > run-$solver-$np.log 2>&1 || { cat run-$solver-$np.log; fail "fit with the plugin on $np rank(s) ($solver)"; }
        dump "$solver-$np.h5" > got-$solver-$np.txt
        same_bits ref-$solver.txt got-$solver-$np.txt || fail "$solver on $np rank(s): the plugin's bits differ from the built-in instantiation"
    done
    # The check can fail: one parameter's last bit flipped in the reference is caught.
    awk 'NR==5 { $2 = ($2 ~ /1p/ ? "0x1.0000000000001p+0" : "0x1p+0") } { print }' ref-$solver.txt > flipped.txt
    ! same_bits flipped.txt got-$solver-1.txt > /dev/null || fail "the comparison cannot fail"
    ok "$solver: plugin on 1 and 3 ranks = the same header compiled in, bit for bit (201 replicas)"
done
# A plugin of the built-in gaussian2d's formula (perf/plugin/spot_plugin.hpp, the benchmark's)
# gives gaussian2d's bits: the same LM code and the same ef_math, across the library boundary.
cp -r "$SRC/perf/plugin" spot
cmake -S spot -B spot/build -DCMAKE_PREFIX_PATH="$WORK/prefix" > spot.log 2>&1 || { cat spot.log; fail "configure perf/plugin"; }
cmake --build spot/build > spot-build.log 2>&1 || { cat spot-build.log; fail "build perf/plugin"; }
for solver in qr float; do
    extra=(--fit.replicas=40); [ "$solver" = float ] && extra+=(--fit.precision=float)
    run_np 1 fit "$SRC/inputs/spot.ini" --model.name=gaussian2d "${extra[@]}" --output.file="$WORK/g2d-$solver.h5" \
        > g2d.log 2>&1 || { cat g2d.log; fail "gaussian2d ($solver)"; }
    run_np 3 fit "$SRC/inputs/spot.ini" --model.name=plugin --model.plugin="$WORK/spot/build/libspot_plugin.so" \
        "${extra[@]}" --output.file="$WORK/spot-$solver.h5" > spot-run.log 2>&1 || { cat spot-run.log; fail "spot plugin ($solver)"; }
    $H5CHECK equal "g2d-$solver.h5" "spot-$solver.h5" /replicas /central /summary ||
        fail "$solver: the gaussian2d plugin on 3 ranks differs from the built-in gaussian2d"
done
ok "the gaussian2d formula as a plugin (3 ranks) = the built-in gaussian2d (1 rank), qr and float, bit for bit"

# Shards and merge are the built-ins': two shards merged = one run, bit for bit.
for i in 0 1; do
    run_np 1 fit "$CFG" --model.plugin="$PLUGIN" --shard $i/2 --output.file="$WORK/shard$i.h5" > shard$i.log 2>&1 ||
        { cat shard$i.log; fail "shard $i/2"; }
done
"$EF" merge -o merged.h5 shard1.h5 shard0.h5 > merge.log 2>&1 || { cat merge.log; fail "merge"; }
$H5CHECK equal merged.h5 qr-3.h5 /replicas /central /summary || fail "plugin shards merged differ from one run"
ok "plugin: 2 shards merged = the 3-rank run"
grep -q "plugin michaelis-menten" run-qr-1.log || { cat run-qr-1.log; fail "the run does not name the plugin model"; }

# Errors: one line, exit 2 each.
expect_error 2 "model.plugin: model plugin '.*nowhere.so': no such file" -- \
    "$EF" fit "$CFG" --model.plugin="$WORK/nowhere.so" --output.file="$WORK/e1.h5"
printf 'extern "C" int not_a_model() { return 1; }\n' > noentry.cpp
g++ -shared -fPIC -o libnoentry.so noentry.cpp
expect_error 2 "has no entry point ensemblefit_model_plugin" -- \
    "$EF" fit "$CFG" --model.plugin="$WORK/libnoentry.so" --output.file="$WORK/e2.h5"
cat > badabi.cpp <<'CPP'
#include <ensemblefit/model/model_plugin.hpp>
static const char* const names[] = {"vmax", "km"};
static const EfModelPlugin table{EF_MODEL_PLUGIN_ABI_VERSION + 1000, "stale", 2, names,
                                 nullptr, nullptr, nullptr, nullptr, nullptr};
extern "C" const EfModelPlugin* ensemblefit_model_plugin() { return &table; }
CPP
g++ -std=c++20 -shared -fPIC -Iprefix/include -o libbadabi.so badabi.cpp
expect_error 2 "was built for plugin ABI version [0-9]+, this ensemblefit loads version [0-9]+" -- \
    "$EF" fit "$CFG" --model.plugin="$WORK/libbadabi.so" --output.file="$WORK/e3.h5"
sed 's/^\[param.km\]/[param.k]/' "$CFG" > example/badnames.ini
expect_error 2 "missing section \[param.km\] for model 'michaelis-menten' \(parameters: vmax, km\)" -- \
    "$EF" fit example/badnames.ini --model.plugin="$PLUGIN" --output.file="$WORK/e4.h5"
expect_error 2 "model plugin 'michaelis-menten' has no GPU code" -- \
    "$EF" fit "$CFG" --model.plugin="$PLUGIN" --run.workers=gpu --output.file="$WORK/e5.h5"
for f in e1 e2 e3 e4 e5; do [ ! -e "$f.h5" ] || fail "$f.h5 written by a refused run"; done
