#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what ensemblefit needs on Debian 12 (as root), then configures and builds it in
# build/, saying what it does and how long each step took. Safe to run again: apt-get only
# runs when a package is missing, cmake only rebuilds what changed. The CUDA worker is built
# when nvcc exists and a GPU is visible (ENSEMBLEFIT_CUDA=AUTO); EF_CMAKE_ARGS adds CMake
# options, e.g. EF_CMAKE_ARGS=-DENSEMBLEFIT_CUDA=ON to build it on a machine without a GPU
# (add -DCMAKE_CUDA_ARCHITECTURES=90 for an H100/H200 only, or =90-virtual for a compile check
# without ptxas, as .ci/run does; the default compiles for sm_80 and sm_90). Where ccache is
# installed it caches every compile, CUDA's too (EF_CCACHE=0: not used; CCACHE_DIR: where), so a
# build folder deleted or a second clone rebuilds from the cache.
#
#   tools/setup.sh               everything: the program, the tests, the examples (.ci/run, and
#                                the README's second command, which then runs ctest)
#   tools/setup.sh ensemblefit   only these CMake targets: the README's first command builds the
#                                program alone (ef_core and ensemblefit), not the ~280 test targets
set -euo pipefail
for a in "$@"; do
    case "$a" in -*) echo "usage: tools/setup.sh [CMAKE-TARGET...]   (none: build everything)" >&2; exit 2 ;; esac
done
cd "$(dirname "$0")/.."
t0=$SECONDS
step() { echo "setup: $*"; }
took() { echo "setup:   done in $((SECONDS - $1)) s"; }

packages=(g++ make cmake pkg-config libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools
          libboost-program-options-dev catch2 librandom123-dev libfftw3-dev libpng-dev libyaml-cpp-dev
          python3-numpy python3-scipy python3-h5py python3-matplotlib python3-yaml)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    t=$SECONDS
    step "installing ${#missing[@]} Debian package(s): ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
    took $t
else
    step "Debian packages: all ${#packages[@]} present"
fi

t=$SECONDS
step "configuring build/ (log: build/configure.log)"
mkdir -p build
cache=
if [ "${EF_CCACHE:-1}" != 0 ] && command -v ccache > /dev/null; then
    cache=ccache
    step "compiler cache: ccache in $(ccache --get-config cache_dir 2>/dev/null || echo "its default folder")"
fi
# Set either way, so that EF_CCACHE=0 also takes ccache out of an existing build/.
launcher=(-DCMAKE_C_COMPILER_LAUNCHER=$cache -DCMAKE_CXX_COMPILER_LAUNCHER=$cache
          -DCMAKE_CUDA_COMPILER_LAUNCHER=$cache)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" ${EF_CMAKE_ARGS:-} > build/configure.log 2>&1 \
    || { cat build/configure.log; exit 1; }
grep -E "^-- CUDA worker|^ \* CUDA" build/configure.log | sed 's/^/setup:   /' || true
took $t

t=$SECONDS
if [ $# -gt 0 ]; then
    step "building $* and what it needs ($(nproc) jobs; log: build/build.log; the tests: tools/setup.sh)"
    target_args=(--target "$@")
else
    targets=$(cmake --build build --target help 2>/dev/null | grep -c '^\.\.\. ' || true)
    step "building ($targets targets, $(nproc) jobs; log: build/build.log)"
    target_args=()
fi
cmake --build build -j"$(nproc)" "${target_args[@]}" > build/build.log 2>&1 || { grep -E -A5 "error" build/build.log | head -80; exit 1; }
took $t
mkdir -p runs  # the README's commands write their outputs here (git-ignored)
if [ -x build/ensemblefit ]; then
    step "built build/ensemblefit ($(build/ensemblefit --version | head -1)) in $((SECONDS - t0)) s in all"
else
    step "built $* in $((SECONDS - t0)) s in all"
fi
