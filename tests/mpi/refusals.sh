#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A clear end instead of a bug's (issue 39): a reconstruction that diverges ends with exit 3 and
# one line on any number of ranks (exit 1 means a bug).
source "$(dirname "$0")/../tools/mpi_common.sh"

# 1. A diverging reconstruction (learning rates of 1e30): exit 3, one line, on 1 and 2 ranks.
"$EF" simulate ptycho --out sim.h5 --scan 8 --dp 32 --seed 3 > sim.log
cat > wild.ini <<'INI'
[data]
file = sim.h5
[object]
lr_amplitude = 1e30
lr_phase = 1e30
[probe]
lr = 1e30
defocus = 0
[solver]
iterations = 5
batch_size = 16
[output]
file = wild.h5
previews = false
INI
expect_error 3 "reconstruction diverged: the loss is .* at iteration 1 \(lower the learning rates\)" -- \
    run_np 1 reconstruct wild.ini
expect_error 3 "reconstruction diverged" -- run_np 2 reconstruct wild.ini --output.file wild2.h5
[ "$(grep -c 'diverged' err.txt)" = 1 ] || { cat err.txt; fail "a divergence on 2 ranks printed more than one line"; }
ok "a diverged reconstruction: exit 3, one line (1 and 2 ranks)"

echo "refusals: all checks passed"
