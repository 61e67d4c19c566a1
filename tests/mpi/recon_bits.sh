#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Reconstruction bits independent of the rank count and of throughput balancing, for window
# sizes that are not powers of two (issue 35: on the GPU machine 48, 80 and 96 pixels differed
# between 1 and 2 ranks, and between two 2-rank runs on a busy machine). 48- and 80-pixel
# reconstructions (3 probe modes, position correction on, so every gradient sum and the
# positions' exchange are exercised) on 1, 2 and 3 ranks, and on 2 ranks with --debug.speeds
# forcing unequal shares that move twice: /object, /probe, /positions and /loss bitwise equal.
source "$(dirname "$0")/../tools/mpi_common.sh"

for dp in 48 80; do
    "$EF" simulate ptycho --out sim$dp.h5 --scan 12 --dp $dp --modes 3 --dose 1e6 --mode-power 0.1 --seed 5 \
        --jitter 0.2 --scan-pattern raster > sim$dp.log || { cat sim$dp.log; fail "simulate ptycho, $dp px"; }
    cat > r$dp.ini <<INI
[data]
file = sim$dp.h5
[model]
modes = 3
[object]
lr_amplitude = 5e-3
lr_phase = 5e-3
[probe]
lr = 0.02
start = 2
defocus = 0
[positions]
correct = true
lr = 0.01
start = 3
[solver]
iterations = 8
batch_size = 24
seed = 7
[run]
balance = throughput
[output]
file = np1_$dp.h5
previews = false
report_every = 4
INI
    run_np 1 reconstruct r$dp.ini > np1_$dp.log || { cat np1_$dp.log; fail "$dp px, 1 rank"; }
    run_np 2 reconstruct r$dp.ini --output.file np2_$dp.h5 > np2_$dp.log || { cat np2_$dp.log; fail "$dp px, 2 ranks"; }
    run_np 3 reconstruct r$dp.ini --output.file np3_$dp.h5 > np3_$dp.log || { cat np3_$dp.log; fail "$dp px, 3 ranks"; }
    # Forced unequal throughput: shares 4:20 after iteration 1, then 18:6 after iteration 2.
    run_np 2 reconstruct r$dp.ini --output.file sp_$dp.h5 --debug.speeds 1,5/3,1 > sp_$dp.log ||
        { cat sp_$dp.log; fail "$dp px, 2 ranks, --debug.speeds"; }
    grep -q "rebalanced shares (strata per rank): 4 20" sp_$dp.log && grep -q "shares (strata per rank): 18 6" sp_$dp.log ||
        { cat sp_$dp.log; fail "$dp px: --debug.speeds did not move the shares"; }
    for f in np2_$dp.h5 np3_$dp.h5 sp_$dp.h5; do
        $H5CHECK equal np1_$dp.h5 $f /object /probe /positions /loss || fail "$dp px: $f differs from np1_$dp.h5"
    done
    ok "$dp px: 1, 2, 3 ranks and 2 ranks with moving unequal shares: /object, /probe, /positions, /loss bitwise equal"
done
