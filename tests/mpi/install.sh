#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `cmake --install` gives a program, headers and a CMake package that another project can
# find_package() and link: a consumer built against the installed tree fits a line.
source "$(dirname "$0")/../tools/mpi_common.sh"
BUILD=${EF_BUILD_DIR:?EF_BUILD_DIR must point at the build tree}
cmake --install "$BUILD" --prefix "$WORK/prefix" > install.log
test -x prefix/bin/ensemblefit || fail "no installed program"
test -f prefix/include/ensemblefit/fit/fit_problem.hpp || fail "no installed headers"
prefix/bin/ensemblefit --version | grep -q ensemblefit || fail "installed program does not run"
mkdir consumer
cat > consumer/CMakeLists.txt <<'CM'
cmake_minimum_required(VERSION 3.25)
project(consumer LANGUAGES C CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(ensemblefit REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE ensemblefit::ef_core)
CM
cat > consumer/main.cpp <<'CPP'
#include <cstdio>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/worker/worker.hpp>
int main(int, char** argv) {
    ef::FitConfig cfg = ef::load_fit_config(argv[1], {});
    ef::FitProblem pb = ef::make_fit_problem(cfg, ef::load_data(cfg));
    auto worker = ef::make_worker(ef::WorkerKind::cpu, pb, ef::WorkerOptions{});
    ef::ReplicaBlock out;
    worker->run(ef::WorkUnit{{0}}, out);
    std::printf("%.6f %.6f %lld\n", out.params[0], out.params[1], static_cast<long long>(out.status[0]));
}
CPP
printf 'x,y\n0,1\n1,3\n2,5\n3,7\n' > consumer/line.csv
printf '[data]\nfile = line.csv\nx = x\ny = y\nsigma = 1\n[model]\nname = linear\n[param.a]\nstart = 0\n[param.b]\nstart = 0\n[output]\nfile = x.h5\n' > consumer/line.ini
cmake -S consumer -B consumer/build -DCMAKE_PREFIX_PATH="$WORK/prefix" > consumer.log 2>&1 || { cat consumer.log; fail "configure"; }
cmake --build consumer/build > consumer-build.log 2>&1 || { cat consumer-build.log; fail "build"; }
got=$(consumer/build/consumer consumer/line.ini)
[ "$got" = "1.000000 2.000000 0" ] || fail "consumer printed '$got'"
ok "installed package: find_package(ensemblefit) + ensemblefit::ef_core fits a line: $got"
