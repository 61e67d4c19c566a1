#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Model plugins and what a result file may load (docs/security.md): a result file never loads
# code by itself (predict refuses a plugin fit's file unless the library is named again or
# --trust-plugin is given; a library planted in TMPDIR or the current folder never runs; the
# README's plugin example predicts); the plugin's SHA-256, name and ABI are part of the run's
# identity (--resume, merge and predict refuse another library, naming both hashes); a plugin
# that crashes in its constructor or its model ends the run with one line naming it, exit 4.
# The plugins are built here from the source tree with g++ (tests/mpi/plugin.sh builds the
# example against the installed package).
source "$(dirname "$0")/../tools/mpi_common.sh"
BUILD=${EF_BUILD_DIR:?EF_BUILD_DIR must point at the build tree}

# build_plugin HEADER TYPE OUT.so [EXTRA...]: a plugin of model TYPE of HEADER.
build_plugin() {
    local header=$1 type=$2 out=$3; shift 3
    printf '#include "%s"\n#include "kernels/plugin/model_plugin_entry.hpp"\nEF_DEFINE_MODEL_PLUGIN(%s)\n' \
        "$header" "$type" > "$out.cpp"
    g++ -std=c++20 -O1 -shared -fPIC -fvisibility=hidden -ffp-contract=off "$@" -I"$(dirname "$header")" \
        -I"$SRC" -I"$SRC/include" -I"$BUILD/generated" -o "$out" "$out.cpp" || fail "build $out"
}
# attr FILE NAME: a root attribute of a result file.
attr() {
    /usr/bin/python3 -c 'import sys, h5py; v = h5py.File(sys.argv[1], "r").attrs[sys.argv[2]]; print(v.decode() if isinstance(v, bytes) else v)' "$1" "$2"
}

# The README's example as it stands: examples/plugin/michaelis_menten.ini names
# build/libmichaelis_menten.so, relative to its folder; the fit runs from the folder above.
mkdir -p repo/examples && cp -r "$SRC/examples/plugin" repo/examples/plugin && rm -rf repo/examples/plugin/build
mkdir -p repo/examples/plugin/build
LIB=$WORK/repo/examples/plugin/build/libmichaelis_menten.so
build_plugin "$WORK/repo/examples/plugin/michaelis_menten.hpp" MichaelisMenten "$LIB"
SHA=$(sha256sum "$LIB" | cut -d' ' -f1)
cd repo
run_np 1 fit examples/plugin/michaelis_menten.ini --fit.replicas 20 --output.file fit.h5 > fit.log 2>&1 ||
    { cat fit.log; fail "fit of the README's plugin example"; }
[ "$(attr fit.h5 plugin_sha256)" = "$SHA" ] || fail "plugin_sha256 is not the library's SHA-256"
[ "$(attr fit.h5 plugin_name)" = michaelis-menten ] || fail "plugin_name"
[ "$(attr fit.h5 plugin_path)" = "$LIB" ] || fail "plugin_path $(attr fit.h5 plugin_path), not $LIB"
[ "$(attr fit.h5 plugin_abi)" -ge 1 ] || fail "plugin_abi"
ok "the run's identity holds the plugin: $(attr fit.h5 plugin_name), ABI $(attr fit.h5 plugin_abi), SHA-256 ${SHA:0:16}..."
printf 's\n0.5\n2\n8\n' > points.csv

# A library planted where the stored relative path would have been looked up (TMPDIR, the
# current folder): it leaves a mark if it ever runs.
cat > evil.cpp <<'CPP'
#include <cstdio>
__attribute__((constructor)) static void mark() { std::FILE* f = std::fopen(EVIL_MARK, "w"); if (f) std::fclose(f); }
extern "C" const void* ensemblefit_model_plugin() { mark(); return nullptr; }
CPP
mkdir -p evil-tmp/build build
g++ -shared -fPIC -DEVIL_MARK="\"$WORK/evil-ran\"" -o evil-tmp/build/libmichaelis_menten.so evil.cpp
cp evil-tmp/build/libmichaelis_menten.so build/libmichaelis_menten.so
TMPDIR=$WORK/repo/evil-tmp expect_error 2 "fit.h5: the fit's model is the plugin 'build/libmichaelis_menten.so' \(michaelis-menten, SHA-256 $SHA\); a result file never loads code by itself: name the library with --model.plugin PATH, or pass --trust-plugin to load $LIB" \
    -- run_np 1 predict fit.h5 --at points.csv
[ ! -e "$WORK/evil-ran" ] || fail "a planted library ran"
TMPDIR=$WORK/repo/evil-tmp run_np 1 predict fit.h5 --at points.csv --trust-plugin > trusted.csv 2> trusted.err ||
    { cat trusted.err; fail "predict --trust-plugin of the README's example"; }
run_np 2 predict fit.h5 --at points.csv --model.plugin examples/plugin/build/libmichaelis_menten.so > named.csv 2> named.err ||
    { cat named.err; fail "predict --model.plugin"; }
cmp trusted.csv named.csv || fail "predict: --trust-plugin and --model.plugin differ"
[ "$(wc -l < named.csv)" = 4 ] || fail "predict wrote $(wc -l < named.csv) lines"
[ ! -e "$WORK/evil-ran" ] || fail "a planted library ran"
ok "predict of the README's plugin example: refused without consent, same values with --trust-plugin and --model.plugin, the planted libraries never ran"

# Another library at the same path (rebuilt: other bytes, same name and ABI).
cp "$LIB" lib-before.so
cat lib-before.so > "$LIB" && printf 'rebuilt' >> "$LIB"
SHA2=$(sha256sum "$LIB" | cut -d' ' -f1)
expect_error 2 "fit.h5: --resume: the model plugin differs: SHA-256 $SHA2 \(michaelis-menten, ABI [0-9]+\) here \($LIB\), $SHA \(michaelis-menten, ABI [0-9]+\) in the file" \
    -- run_np 1 fit examples/plugin/michaelis_menten.ini --fit.replicas 20 --output.file fit.h5 --resume
expect_error 2 "fit.h5: the model plugin differs: SHA-256 $SHA2 .* here .*, $SHA .* in the file; predict needs the library the fit ran" \
    -- run_np 1 predict fit.h5 --at points.csv --trust-plugin
cp lib-before.so "$LIB"
run_np 1 fit examples/plugin/michaelis_menten.ini --fit.replicas 20 --output.file fit.h5 --resume > resume.log 2>&1 ||
    { cat resume.log; fail "--resume with the same library"; }
for i in 0 1; do
    [ "$i" = 1 ] && { cat lib-before.so > "$LIB"; printf 'rebuilt' >> "$LIB"; }
    run_np 1 fit examples/plugin/michaelis_menten.ini --fit.replicas 20 --shard $i/2 --output.file shard$i.h5 > shard$i.log 2>&1 ||
        { cat shard$i.log; fail "shard $i/2"; }
done
expect_error 2 "merge: the model plugin differs: SHA-256 $SHA2 .* in shard1.h5, $SHA .* in shard0.h5; the shards ran different models" \
    -- "$EF" merge -o merged.h5 shard0.h5 shard1.h5
[ ! -e merged.h5 ] || fail "a refused merge wrote its output"
ok "a changed plugin: --resume, predict and merge refuse it, naming both hashes"
cd "$WORK"

# Crashes: in the constructor (every rank) and in the model; one line naming the plugin, exit 4.
cat > ctor.cpp <<'CPP'
__attribute__((constructor)) static void boom() { *static_cast<volatile int*>(nullptr) = 1; }
extern "C" const void* ensemblefit_model_plugin() { return nullptr; }
CPP
g++ -shared -fPIC -o libctor.so ctor.cpp
sed -e 's/"michaelis-menten"/"crashy"/' -e 's|const T s = T(x\[0\]);|if (x[0] > 1e9 \|\| p != nullptr) *static_cast<volatile int*>(nullptr) = 1; const T s = T(x[0]);|' \
    "$SRC/examples/plugin/michaelis_menten.hpp" > crashy.hpp
build_plugin "$WORK/crashy.hpp" MichaelisMenten "$WORK/libcrashy.so"
cp "$SRC/examples/plugin/enzyme.csv" "$SRC/examples/plugin/michaelis_menten.ini" .
expect_error 4 "the model plugin '.*libctor.so' \(SHA-256 [0-9a-f]{12}\.\.\.\) crashed: SIGSEGV \(invalid memory access\); the run stops" \
    -- run_np 1 fit michaelis_menten.ini --model.plugin "$WORK/libctor.so" --output.file c1.h5
expect_error 4 "the model plugin 'crashy' \(.*libcrashy.so\) crashed: SIGSEGV \(invalid memory access\); the run stops" \
    -- run_np 1 fit michaelis_menten.ini --model.plugin "$WORK/libcrashy.so" --output.file c2.h5
rc=0
run_np 2 fit michaelis_menten.ini --model.plugin "$WORK/libctor.so" --output.file c3.h5 > c3.out 2> c3.err || rc=$?
[ "$rc" = 4 ] || { cat c3.err; fail "a constructor crash on 2 ranks exited $rc, not 4"; }
grep -q "^ensemblefit: error: the model plugin '.*libctor.so' .* crashed: SIGSEGV" c3.err || { cat c3.err; fail "no line naming the plugin on 2 ranks"; }
! grep -q "Signal: Segmentation fault" c3.err || { cat c3.err; fail "Open MPI's crash banner"; }
ok "crashing plugins (constructor on 1 and 2 ranks, model): one line naming the plugin, exit 4"
