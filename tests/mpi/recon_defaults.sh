#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue #25, defaults that converge: four corners of the default-convergence sweep
# (perf/recon/bench.sh sweep small), each simulated and reconstructed with a minimal config
# (the data file and the output: every step size, the batch and the schedule are defaults), on
# 2 ranks, against the simulated truth's phase.
# Sized for CI's 2 cores by taking the range's smallest scan (16 x 16 = 256 patterns) and
# pattern size (64 x 64): an iteration is 1/64 of the largest corner's, and the corners' other
# axes (dose 1e5 and 1e9, overlap 60 and 85 %, 1 and 4 probe modes in the data) are kept.
# ITERATIONS = 100, half the issue's 200: at this size the corners have settled by then. Not
# fewer: the rates decay over the run, so a shorter run is another schedule.
# Data: simulate's default scan, a Fermat spiral whose mean nearest-neighbour step is the step
# below. Defaults: 4 probe modes, amplitude data term (docs/architecture.md says why).
# Limits: the issue's 5 % at the corner the defaults reach it (1e9 counts, 85 % overlap: 0.69 %
# after 100 iterations); elsewhere the measured NRMSE plus about 30 %, a guard against
# regressions, not the goal (measured, 1 rank, the same data: 1e9 / 60 % / 4 modes 6.88 %,
# 1e5 / 85 % / 4 modes 6.86 %, 1e5 / 60 % / 1 mode 10.33 %; perf/RESULTS.md, "Default
# convergence", says where each stops and why).
source "$(dirname "$0")/../tools/mpi_common.sh"
ITERATIONS=100

# The simulated scan: by default a Fermat spiral of N x M points whose mean nearest-neighbour
# distance is --step (what the corners' overlap means), no two points on a common grid;
# --scan-pattern raster the exact grid; anything else refused before a file is made.
"$EF" simulate ptycho --out spiral.h5 --scan 12x9 --dp 32 --modes 1 --step 3 > spiral.log || fail "simulate spiral"
"$EF" simulate ptycho --out grid.h5 --scan 12x9 --dp 32 --modes 1 --step 3 --scan-pattern raster > grid.log ||
    fail "simulate raster"
/usr/bin/python3 - <<'PY' || fail "scan patterns"
import h5py, numpy as np
def nn(p):
    d = np.sqrt(((p[:, None, :] - p[None, :, :]) ** 2).sum(-1)) + np.eye(len(p)) * 1e9
    return d.min(1)
s = h5py.File("spiral.h5")
p = s["/positions"][:]
assert p.shape == (108, 2) and s.attrs["scan_pattern"] in (b"fermat", "fermat"), (p.shape, s.attrs["scan_pattern"])
assert abs(nn(p).mean() - 3) < 1e-9, nn(p).mean()
assert nn(p).min() > 1.5, nn(p).min()  # evenly spread: no two points close
frac = np.abs(p / 3 - np.round(p / 3)).max(1)
assert (frac > 1e-3).sum() > 100, "spiral points on the raster's grid"
ext = p.max(0) - p.min(0)
assert 1.05 < ext[0] / ext[1] < 1.6, ext  # the 12 x 9 raster's rectangle (11 x 8 steps)
g = h5py.File("grid.h5")["/positions"][:]
d = g - g[0]
assert np.allclose(d / 3, np.round(d / 3), atol=1e-12) and len(np.unique(np.round(d[:, 0] / 3))) == 12
print("spiral: 108 points, mean nearest neighbour %.12g, min %.3g; raster exact" % (nn(p).mean(), nn(p).min()))
PY
ok "simulate ptycho: Fermat spiral by default (mean nearest-neighbour step = --step), --scan-pattern raster the grid"
# Counts whose rectangle holds fewer spiral points than asked (64 x 64, 100 x 100, 120 x 120 did:
# simulate looped for ever) widen the rectangle until it holds them all.
for n in 64 100; do
    timeout 120 "$EF" simulate ptycho --out wide.h5 --scan "$n" --dp 8 --modes 1 --overwrite > wide.log ||
        { cat wide.log; fail "simulate --scan $n (a Fermat spiral of $((n * n)) points) did not finish"; }
    grep -q "^simulated $((n * n)) patterns" wide.log || { cat wide.log; fail "simulate --scan $n: not $((n * n)) patterns"; }
done
ok "simulate ptycho: Fermat spirals of 64 x 64 and 100 x 100 points (once endless) finish"
expect_error 2 "simulate ptycho: --scan-pattern must be fermat or raster, got 'hex'" -- \
    "$EF" simulate ptycho --out never.h5 --scan 4 --dp 16 --scan-pattern hex
[ ! -e never.h5 ] || fail "a refused simulate left never.h5"

# corner NAME DOSE STEP MODES LIMIT(%): simulate, reconstruct with defaults, NRMSE below LIMIT.
corner() {
    local name=$1 dose=$2 step=$3 modes=$4 limit=$5
    "$EF" simulate ptycho --out "$name.h5" --scan 16 --dp 64 --modes "$modes" --dose "$dose" --step "$step" \
        > "$name.sim.log" || { cat "$name.sim.log"; fail "simulate $name"; }
    printf '[data]\nfile = %s.h5\n[output]\nfile = %s.out.h5\npreviews = false\n' "$name" "$name" > "$name.ini"
    run_np 2 reconstruct "$name.ini" --solver.iterations "$ITERATIONS" > "$name.log" 2> "$name.err" ||
        { cat "$name.log" "$name.err"; fail "reconstruct $name"; }
    local nrmse
    nrmse=$(sed -n 's/^phase NRMSE against the truth: \([0-9.]*\)%.*/\1/p' "$name.log")
    [ -n "$nrmse" ] || { cat "$name.log"; fail "$name: no phase NRMSE line"; }
    awk -v n="$nrmse" -v l="$limit" 'BEGIN { exit !(n < l) }' ||
        { tail -25 "$name.log"; fail "$name: phase NRMSE $nrmse % with the defaults, not below $limit %"; }
    ok "$name (dose $dose, step $step px, $modes modes in the data): phase NRMSE $nrmse % < $limit % with defaults"
}

# overlap 60 % = step 6.4 px, 85 % = 2.4 px (probe disc diameter dp / 4 = 16 px)
corner dose9_overlap85_modes1 1e9 2.4 1 5
corner dose9_overlap60_modes4 1e9 6.4 4 5
corner dose5_overlap85_modes4 1e5 2.4 4 10
corner dose5_overlap60_modes1 1e5 6.4 1 13.5

# probe.defocus = auto: a probe made from the mean pattern has no phase; a strongly defocused
# probe (radius 16 px in a 64-pixel window: phase 5.03 rad at the aperture's edge, simulate's
# default at 128 pixels) started flat ends in a wrong minimum. The trials find the defocus, the
# run converges, /probe says so, and a run given the chosen number skips the trials and ends in
# the same bits (the trials leave no state behind: moments, step counts, positions).
"$EF" simulate ptycho --out focus.h5 --scan 12 --dp 64 --probe-radius 16 --dose 1e9 --modes 1 > focus.sim.log ||
    fail "simulate focus"
printf '[data]\nfile = focus.h5\n[output]\nfile = %s\npreviews = false\n' auto.h5 > auto.ini
printf '[data]\nfile = focus.h5\n[output]\nfile = %s\npreviews = false\n' flat.h5 > flat.ini
run_np 2 reconstruct auto.ini --solver.iterations 30 > auto.log 2>&1 || { cat auto.log; fail "reconstruct, defocus auto"; }
grep -q "^probe: defocus +[0-9.]* rad at the bright disc's edge .* chosen by 9 trial runs" auto.log ||
    { cat auto.log; fail "no trial line"; }
run_np 2 reconstruct flat.ini --solver.iterations 30 --probe.defocus 0 > flat.log 2>&1 ||
    { cat flat.log; fail "reconstruct, defocus 0"; }
chosen=$(/usr/bin/python3 - <<'PY' || fail "defocus attributes"
import h5py
f = h5py.File("auto.h5", "r")
a = f["/probe"].attrs
src = a["initial_defocus_from"]
assert (src.decode() if isinstance(src, bytes) else src) == "trials", src
d = float(a["initial_defocus_rad"])
assert abs(d - 5.03) < 1.0, d  # pi x 16 px x 6.4 px / 64: simulate's probe
assert f.attrs["phase_nrmse"] < 0.05, f.attrs["phase_nrmse"]
g = h5py.File("flat.h5", "r")
assert g.attrs["phase_nrmse"] > 0.5, g.attrs["phase_nrmse"]  # what the trials prevent
src = g["/probe"].attrs["initial_defocus_from"]
assert (src.decode() if isinstance(src, bytes) else src) == "config"
print(repr(d))
PY
)
ok "probe.defocus = auto: $chosen rad chosen (5.03 simulated), phase NRMSE below 5 %; defocus 0: above 50 %"
printf '[data]\nfile = focus.h5\n[output]\nfile = %s\npreviews = false\n' given.h5 > given.ini
run_np 2 reconstruct given.ini --solver.iterations 30 --probe.defocus "$chosen" > given.log 2>&1 ||
    { cat given.log; fail "reconstruct, defocus given"; }
grep -q "trial runs" given.log && fail "a given defocus still ran the trials"
/usr/bin/python3 - <<'PY' || fail "defocus given = auto's choice: not the same bits"
import h5py, numpy as np
a, b = h5py.File("auto.h5", "r"), h5py.File("given.h5", "r")
for k in ("/object", "/probe", "/positions", "/loss"):
    assert np.array_equal(a[k][...], b[k][...]), k
PY
ok "probe.defocus given the chosen value: no trials, the same bits as auto"
expect_error 2 "probe.defocus" -- "$EF" reconstruct given.ini --probe.defocus banana
