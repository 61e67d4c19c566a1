#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what ensemblefit needs on Debian 12 (as root), then configures and builds it in
# build/. Safe to run again: apt-get only runs when a package is missing, cmake only rebuilds
# what changed. CUDA is used when /usr/local/cuda/bin/nvcc exists (ENSEMBLEFIT_CUDA=AUTO).
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(g++ make cmake pkg-config libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools
          libboost-program-options-dev catch2 librandom123-dev libfftw3-dev libpng-dev
          python3-numpy python3-scipy python3-h5py python3-matplotlib)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${EF_CMAKE_ARGS:-} > build-configure.log 2>&1 \
    || { cat build-configure.log; exit 1; }
cmake --build build -j"$(nproc)" > build.log 2>&1 || { grep -E -A5 "error" build.log | head -80; exit 1; }
echo "setup: built build/ensemblefit ($(build/ensemblefit --version | head -1))"
