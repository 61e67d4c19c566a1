#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Packs programs built on this machine, with every shared library they need and a relocatable
# OpenMPI runtime, into one folder that runs on a GPU machine that has the NVIDIA driver but
# none of the project's libraries (no MPI, HDF5, Boost, FFTW, ...).
#
#   tools/gpu/bundle-runtime.sh OUTDIR PROGRAM...
#
# Then, on the GPU machine, from the same relative place:
#   source OUTDIR/env.sh && mpirun -np 2 OUTDIR/bin/PROGRAM ...
# OUTDIR/bin holds copies of the PROGRAMs; OUTDIR/env.sh sets PATH, LD_LIBRARY_PATH, OPAL_PREFIX.
# Build with the GPU's architecture named (-DCMAKE_CUDA_ARCHITECTURES=90 for H100/H200), e.g.
#   cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DENSEMBLEFIT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake --build build-gpu && tools/gpu/bundle-runtime.sh .gpu-run build-gpu/ensemblefit build-gpu/tests/gpu_tests
# The bundle (about 50 MB) is git-ignored (/.gpu-run/); copy it, not the build folder. A line
# "pmix_mca_base_component_repository_open: unable to open ... pmix_mca_pcompress_zlib" at mpirun
# start on the GPU machine is harmless (it has an unrelated PMIx of its own).
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 OUTDIR PROGRAM..." >&2; exit 2; }
out=$1; shift
arch=x86_64-linux-gnu
ompi=/usr/lib/$arch/openmpi
[[ -d $ompi ]] || { echo "OpenMPI is not installed here (apt-get install libopenmpi-dev openmpi-bin)" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out/bin" "$out/usr/bin" "$out/usr/lib/$arch" "$out/usr/share"
cp -a "$ompi" "$out/usr/lib/$arch/"
rm -rf "$out/usr/lib/$arch/openmpi/include" "$out/usr/lib/$arch/openmpi/lib/"*java*
cp -L /usr/bin/orterun "$out/usr/bin/mpirun"
cp -L /usr/bin/orted "$out/usr/bin/orted"
cp -a /usr/share/openmpi "$out/usr/share/"
[[ -d /usr/lib/$arch/pmix2 ]] && cp -a /usr/lib/$arch/pmix2 "$out/usr/lib/$arch/"
for p in "$@"; do cp -L "$p" "$out/bin/"; done
# Every library the programs, mpirun, orted and the MPI plugins load, but the C/C++ runtime,
# which the GPU machine has in a newer, compatible version.
keep='/(libc|libm|libpthread|libdl|librt|ld-linux-x86-64|libstdc\+\+|libgcc_s|libresolv|libcuda|libnvidia-[a-z-]*)\.so'
{ for f in "$@" /usr/bin/orted /usr/bin/orterun "$ompi"/lib/openmpi3/*.so "$ompi"/lib/*.so* /usr/lib/$arch/pmix2/lib/pmix/*.so; do
    ldd "$f" 2>/dev/null | awk '/=>/ && $3 ~ /^\// {print $3}'
  done; } | sort -u | grep -v -E "$keep" | while read -r lib; do cp -L "$lib" "$out/usr/lib/$arch/"; done
cat >"$out/env.sh" <<'ENV'
# source this file on the GPU machine
_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OPAL_PREFIX=$_here/usr
export PATH=$_here/bin:$_here/usr/bin:$PATH
export LD_LIBRARY_PATH=$_here/usr/lib/x86_64-linux-gnu:$_here/usr/lib/x86_64-linux-gnu/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# the GPU machine runs commands as root; its own PMIx plugins do not match this OpenMPI
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PMIX_MCA_pcompress_base_silence_warning=1
export PMIX_INSTALL_PREFIX=$_here/usr/lib/x86_64-linux-gnu/pmix2
export PMIX_MCA_mca_base_component_path=$PMIX_INSTALL_PREFIX/lib/pmix
unset _here
ENV
echo "bundled $(ls "$out/bin" | wc -l) program(s) into $out ($(du -sh "$out" | cut -f1)); on the GPU machine: source $out/env.sh"
