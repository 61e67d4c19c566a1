#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Provenance (issue 25): every attribute of a simulated dataset and of a reconstruction's output
# read back with h5py and checked for its HDF5 type class (numbers as numbers, strings as strings)
# and its value: the simulator's parameters, the data file's attributes copied under
# /data_metadata, command line, version, the input files' sizes and SHA-256 (recomputed here with
# hashlib), the resolved config and the scan geometry. An attribute nobody expects fails the test
# too, so a new one must be added here with its type. Then the progress lines (change over 10
# iterations, ETA) and the stall warning: once, on stderr, and the run still succeeds.
source "$(dirname "$0")/../tools/mpi_common.sh"
PY=/usr/bin/python3

"$EF" simulate ptycho --out sim.h5 --scan 8 --dp 32 --modes 2 --dose 1e7 --step 3.5 --seed 5 --mode-power 0.1 \
    --scan-pattern raster > sim.log || { cat sim.log; fail "simulate ptycho"; }
cat > recon.ini <<'INI'
[data]
file = sim.h5
[model]
modes = 2
[object]
lr_amplitude = 5e-3
lr_phase = 5e-3
[probe]
lr = 0.03
start = 2
[solver]
iterations = 12
batch_size = 16
seed = 11
[output]
file = out.h5
report_every = 1
previews = false
INI
run_np 2 reconstruct recon.ini > recon.log 2> recon.err || { cat recon.log recon.err; fail "reconstruction"; }

$PY - <<'PY' || fail "attributes"
import hashlib, os, re
import h5py, numpy as np

F, I, S = h5py.h5t.FLOAT, h5py.h5t.INTEGER, h5py.h5t.STRING
ANY = object()

def check(h, obj, expected):
    """Every attribute of obj: in `expected` as (class, value or ANY or predicate), right class, right value."""
    attrs = h[obj].attrs
    for name in attrs:
        assert name in expected, f"{obj}: unexpected attribute '{name}' = {attrs[name]!r}"
    for name, (cls, want) in expected.items():
        assert name in attrs, f"{obj}: attribute '{name}' missing"
        got_cls = attrs.get_id(name).get_type().get_class()
        assert got_cls == cls, f"{obj}@{name}: HDF5 class {got_cls}, wanted {cls}"
        v = attrs[name]
        if isinstance(v, bytes):
            v = v.decode()
        if want is ANY:
            continue
        if callable(want):
            assert want(v), f"{obj}@{name}: {v!r} fails its check"
        elif cls == S:
            assert v == want, f"{obj}@{name}: {v!r}, wanted {want!r}"
        else:
            assert np.shape(v) == np.shape(want) and np.allclose(v, want, rtol=1e-12, atol=0), \
                f"{obj}@{name}: {v!r}, wanted {want!r}"

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

pos = lambda v: np.all(np.asarray(v) > 0)
with h5py.File("sim.h5", "r") as s:
    sim_expected = {
        "simulator": (S, "ensemblefit simulate ptycho"),
        "version": (S, lambda v: re.match(r"\d+\.\d+", v)),
        "command": (S, lambda v: "simulate ptycho --out sim.h5 --scan 8 --dp 32" in v),
        "date": (S, lambda v: re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", v)),
        "dose": (F, 1e7), "kv": (F, 80.0), "step_px": (F, 3.5), "seed": (I, 5), "scan": (I, [8, 8]),
        "scan_pattern": (S, "raster"),
        "modes": (I, 2), "mode_power": (F, 0.1), "jitter_px": (F, 0.0), "position_error_px": (F, 0.0),
        "dp": (I, 32), "aperture_px": (F, 3.2), "dx_angstrom": (F, pos), "wavelength_angstrom": (F, pos),
        "conv_angle_mrad": (F, pos),
        # Kirkland's underfocus of the default probe, r n dx^2 / (lambda R) with r = 32 / 8, in nm
        "defocus_nm": (F, lambda v: abs(v - 0.1 * 4 * 32 * 0.1494 ** 2 / (0.0418 * 3.2)) < 1e-9),
        "object_shape": (I, lambda v: np.shape(v) == (2,) and np.all(v >= 32)),
    }
    check(s, "/", sim_expected)
    sim_attrs = {k: s.attrs[k] for k in s.attrs}
    sim_classes = {k: s.attrs.get_id(k).get_type().get_class() for k in s.attrs}
    sim_pos = s["/positions"][...]
    object_shape = list(s.attrs["object_shape"])

with h5py.File("out.h5", "r") as o:
    check(o, "/", {
        "config": (S, lambda v: "file = sim.h5" in v and re.search(r"iterations = 12\b", v)),
        "command": (S, lambda v: v.endswith("reconstruct recon.ini")),
        "version": (S, sim_attrs["version"].decode() if isinstance(sim_attrs["version"], bytes) else sim_attrs["version"]),
        "checksum": (S, "SHA-256"),
        "data_file": (S, "sim.h5"), "data_bytes": (I, os.path.getsize("sim.h5")), "data_sha256": (S, sha256("sim.h5")),
        "config_file": (S, "recon.ini"), "config_bytes": (I, os.path.getsize("recon.ini")),
        "config_sha256": (S, sha256("recon.ini")),
        "iterations_done": (I, 12), "complete": (I, 1), "roi": (I, lambda v: np.shape(v) == (4,)),
        "phase_nrmse": (F, lambda v: 0 < v < 2), "phase_rmse": (F, lambda v: v > 0),
        # issue 38: the detector's decisions (clean simulated data: centred, nothing masked)
        "detector_beam_centre_px": (F, lambda v: np.allclose(v, [16, 16], atol=0.5)),
        "detector_shift_px": (F, [0.0, 0.0]), "detector_masked_pixels": (I, 0),
    })
    # The data file's attributes, each with its own class and value.
    check(o, "/data_metadata", {k: (sim_classes[k], v.decode() if isinstance(v, bytes) else v)
                                for k, v in sim_attrs.items()})
    lo = sim_pos.min(axis=0)
    hi = sim_pos.max(axis=0)
    check(o, "/positions", {
        "object_offset": (F, lambda v: np.shape(v) == (2,)), "description": (S, ANY),
        "unit": (S, "px"), "pixel_size": (F, 0.1494e-10), "pixel_size_unit": (S, "m"),
        "count": (I, 64), "pattern_shape": (I, [32, 32]), "object_shape": (I, object_shape),
        "extent_px": (F, [lo[0], hi[0], lo[1], hi[1]]), "median_step_px": (F, lambda v: abs(v - 3.5) < 1e-9),
    })
print("attributes ok")
PY
ok "sim.h5 and out.h5: every attribute has its type and value; /data_metadata equals sim.h5's root; SHA-256 match"

# Progress: the header names the columns; no change before 11 iterations, then a percentage; ETA 0s at the end.
grep -qE '^ +iter +loss +change/10 +s/iter +ETA +phase NRMSE$' recon.log || { cat recon.log; fail "progress header"; }
grep -qE '^ +10 +[0-9.e+-]+ +-- ' recon.log || { cat recon.log; fail "no change column before 11 iterations"; }
grep -qE '^ +11 +[0-9.e+-]+ +[+-][0-9]+\.[0-9]+% +[0-9.]+ +[0-9]+s' recon.log || { cat recon.log; fail "change and ETA at 11"; }
grep -qE '^ +12 +[0-9.e+-]+ +[+-][0-9]+\.[0-9]+% +[0-9.]+ +0s ' recon.log || { cat recon.log; fail "ETA 0s at the end"; }
grep -qE '^done: 12 iterations in [0-9]+s, loss [0-9.e+-]+ -> [0-9.e+-]+$' recon.log || { cat recon.log; fail "final line"; }
! grep -q "loss has" recon.err || { cat recon.err; fail "stall warning on a falling loss"; }
ok "progress lines: loss change over 10 iterations, ETA, the final line"

# Stall: learning rates of zero leave the per-iteration loss constant: one warning after 21
# iterations, the run goes on to the end.
run_np 1 reconstruct recon.ini --object.lr_amplitude 0 --object.lr_phase 0 --probe.lr 0 --solver.iterations 30 \
    --output.file flat.h5 > flat.log 2> flat.err || { cat flat.log flat.err; fail "flat run"; }
[ "$(grep -c '^ensemblefit: warning: the loss has stopped falling' flat.err)" = 1 ] || { cat flat.err; fail "stall warning once"; }
grep -qE '^ +30 ' flat.log || { cat flat.log; fail "the run did not finish"; }
$H5CHECK get flat.h5 / iterations_done | grep -qx 30 || fail "flat.h5 incomplete"
ok "a flat loss: one 'stopped falling' warning, run completed"
