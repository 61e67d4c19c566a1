#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The real-data example (inputs/dis-real-nlo.ini: NNPDF commondata, correlated systematics
# through the whitened table) on a GPU worker and on a CPU worker: the same bits. Compared
# through `predict --replicas` at a few points (full-precision CSV), so it needs only the
# program, as on the GPU machine's bundle:
#   bash tests/gpu/commondata_gpu.sh "$(command -v ensemblefit)" mpirun
# Exits 77 (skipped) where no GPU is visible.
source "$(dirname "$0")/../tools/mpi_common.sh"
command -v "$EF" > /dev/null || fail "no program $EF"
"$EF" devices --no-probe | grep -q "SMs" || { echo "no CUDA device visible: skipped"; exit 77; }
sed -e "s|^commondata = dis-real|commondata = $SRC/inputs/dis-real|" "$SRC/inputs/dis-real-nlo.ini" > real.ini
printf 'x,Q2,target\n0.01,5,1\n0.1,20,1\n0.3,50,3\n0.6,100,3\n' > points.csv
for w in gpu cpu; do
    run_np 1 fit real.ini --run.workers $w --output.file $w.h5 > $w.log
    grep -q "20 converged" $w.log || fail "$w: not every replica converged"
    "$EF" predict $w.h5 --at points.csv --replicas -o $w.csv > /dev/null
done
cmp gpu.csv cpu.csv || fail "commondata example: GPU and CPU workers differ"
ok "commondata example (NLO, correlated): GPU and CPU workers give the same bits"
