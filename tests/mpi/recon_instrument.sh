#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue 38, instrument data: the EMPAD raw and 4-D HDF5 readers on files written by an
# independent writer (tests/tools/instrument_files.py: numpy and h5py) from simulated native
# files, each reconstruction compared bit for bit with the native file's (1 and 2 ranks, so
# shares that start inside a frame block or a scan row); the scan's transpose, mirror and
# rotation against numpy; every malformed file refused with one line naming it; and the
# detector preprocessing against the simulated truth: a planted hot pixel, a beam 3 px off
# centre and negative (background-subtracted) counts. Small sizes: about 20 s on 2 cores.
source "$(dirname "$0")/../tools/mpi_common.sh"
W="/usr/bin/python3 $SRC/tests/tools/instrument_files.py"

# --- EMPAD raw: 128 x 128 frames + 2 metadata rows (filled with 3e9 by the writer) -------------
"$EF" simulate ptycho --out e.h5 --scan 6x5 --dp 128 --modes 1 --dose 1e6 --scan-pattern raster --step 3 > sim.log ||
    fail "simulate e.h5"
$W empad e.h5 e.raw || fail "write e.raw"
common='[model]
modes = 1
[probe]
defocus = 0
[solver]
iterations = 3
[output]
previews = false'
printf '[data]\nfile = e.h5\n%s\nfile = native.h5\n' "$common" > native.ini
printf '[data]\nfile = e.raw\nscan_shape = 6,5\nscan_step = 3\ntruth = e.h5\n%s\nfile = raw.h5\n' "$common" > raw.ini
run_np 1 reconstruct native.ini > native.log || { cat native.log; fail "reconstruct native"; }
run_np 1 reconstruct raw.ini > raw.log || { cat raw.log; fail "reconstruct EMPAD raw"; }
run_np 2 reconstruct raw.ini --output.file raw2.h5 > raw2.log || { cat raw2.log; fail "reconstruct EMPAD raw, 2 ranks"; }
grep -q "^data: EMPAD raw, frames 128 x 128 (+2 metadata rows, dropped); scan 6 x 5, step 3, 3 px" raw.log ||
    { cat raw.log; fail "no data line for the EMPAD file"; }
/usr/bin/python3 - <<'PY' || fail "EMPAD reconstruction differs from the native file's"
import h5py, numpy as np
n, r, r2 = h5py.File("native.h5"), h5py.File("raw.h5"), h5py.File("raw2.h5")
for k in ("object", "probe", "loss"):
    assert np.array_equal(n[k][...], r[k][...]), k
    assert np.array_equal(r[k][...], r2[k][...]), k + " (2 ranks)"
yy, xx = np.meshgrid(np.arange(6) * 3.0, np.arange(5) * 3.0, indexing="ij")
assert np.array_equal(r["positions"][...], np.stack([yy.ravel(), xx.ravel()], 1)), r["positions"][:4]
assert r.attrs["phase_nrmse"] == n.attrs["phase_nrmse"]
assert r["data_metadata"].attrs["simulator"] is not None and "truth_sha256" in r.attrs
PY
ok "EMPAD raw (numpy-written, metadata rows of 3e9) reconstructs bit for bit as the native file, on 1 and 2 ranks"

# The step as a length (what a microscope reports): 0.4482 A over data.pixel_size 0.1494 A is the
# 3 px above, so the same bits; nm and pm alike. Without a pixel size, or in unknown units, one
# line naming the key (exit 2).
for st in "0.4482 A" "0.04482 nm" "44.82 pm"; do
    run_np 1 reconstruct raw.ini --data.scan_step "$st" --data.pixel_size 1.494e-11 --output.file len.h5 --overwrite \
        > len.log || { cat len.log; fail "scan_step = $st"; }
    grep -q "^data: EMPAD raw, .*; scan 6 x 5, step 0.4482, 0.4482 A = 3, 3 px" len.log ||
        { cat len.log; fail "scan_step = $st: no data line with the step in A and px"; }
    /usr/bin/python3 -c "import h5py, numpy as np; a, b = h5py.File('raw.h5'), h5py.File('len.h5')
assert all(np.array_equal(a[k][...], b[k][...]) for k in ('object', 'probe', 'positions'))" ||
        fail "scan_step = $st: not the reconstruction of scan_step = 3 with 0.1494 A pixels"
done
expect_error 2 "^ensemblefit: error: --data.scan_step: a scan given in lengths needs the object pixel size" -- \
    "$EF" reconstruct raw.ini --output.file never.h5 --data.scan_step "0.4482 A" --data.truth none
expect_error 2 "data.scan_step: unknown unit 'inch' \(px: object pixels, or A, nm, pm, m\)" -- "$EF" reconstruct raw.ini --data.scan_step "3 inch" --output.file never.h5
[ ! -e never.h5 ] || fail "a refused run wrote its output"
ok "data.scan_step in A, nm, pm: converted by the object pixel, the same bits as the step in pixels; refusals name the key"
# simulate ptycho --format empad: raster by default (its frames carry no positions).
"$EF" simulate ptycho --format empad --out sim.raw --scan 3 --modes 1 > simraw.log || { cat simraw.log; fail "simulate --format empad"; }
/usr/bin/python3 -c "import h5py; assert h5py.File('sim.truth.h5').attrs['scan_pattern'] == b'raster'" ||
    fail "simulate --format empad did not default to a raster"
ok "simulate ptycho --format empad makes a raster without --scan-pattern"

# --- 4-D HDF5 [scan_y, scan_x, ky, kx] and a positions list --------------------------------------
"$EF" simulate ptycho --out f.h5 --scan 6x5 --dp 32 --modes 1 --dose 1e6 --scan-pattern raster --step 2 > sim.log ||
    fail "simulate f.h5"
$W fourd f.h5 cube.h5 6 5 /datacube_root/datacube/data || fail "write cube.h5"
$W positions f.h5 list.txt || fail "write list.txt"
printf '[data]\nfile = f.h5\n%s\nfile = fnative.h5\n' "$common" > fnative.ini
printf '[data]\nfile = cube.h5\ndataset = /datacube_root/datacube/data\nscan_step = 2\ntruth = f.h5\n%s\nfile = cube_out.h5\n' \
    "$common" > cube.ini
run_np 1 reconstruct fnative.ini > f.log || { cat f.log; fail "reconstruct f.h5"; }
run_np 2 reconstruct cube.ini > cube.log || { cat cube.log; fail "reconstruct the 4-D array, 2 ranks"; }
run_np 2 reconstruct cube.ini --data.positions list.txt --output.file list_out.h5 > list.log ||
    { cat list.log; fail "reconstruct the 4-D array with a positions list"; }
/usr/bin/python3 - <<'PY' || fail "4-D reconstruction differs from the native file's"
import h5py, numpy as np
n, c, l = h5py.File("fnative.h5"), h5py.File("cube_out.h5"), h5py.File("list_out.h5")
for k in ("object", "probe", "loss"):
    assert np.array_equal(n[k][...], c[k][...]), k
    assert np.array_equal(n[k][...], l[k][...]), k + " (positions list)"
PY
ok "4-D HDF5 (h5py-written, py4DSTEM's layout) and a numpy.savetxt positions list reconstruct bit for bit as the native file"
# The list in A with 1 A pixels is the same list: the same bits; one line for a unit without a list.
run_np 1 reconstruct cube.ini --data.positions list.txt --data.positions_unit A --data.pixel_size 1e-10 \
    --output.file list_a.h5 > list_a.log || { cat list_a.log; fail "positions list in A"; }
grep -q "positions from .*list.txt (1 A = 1 px)" list_a.log || { cat list_a.log; fail "no data line for a list in A"; }
/usr/bin/python3 -c "import h5py, numpy as np; a, b = h5py.File('list_out.h5'), h5py.File('list_a.h5')
assert all(np.array_equal(a[k][...], b[k][...]) for k in ('object', 'probe', 'positions'))" ||
    fail "a positions list in A with 1 A pixels is not the list in pixels"
expect_error 2 "error: --data.positions_unit: only with data.positions" -- \
    "$EF" reconstruct cube.ini --data.positions_unit nm --output.file never.h5
expect_error 2 "data.positions_unit: a scan given in lengths needs the object pixel size" -- \
    "$EF" reconstruct cube.ini --data.positions list.txt --data.positions_unit nm --output.file never.h5
[ ! -e never.h5 ] || fail "a refused run wrote its output"
ok "data.positions_unit: a list in A over 1 A pixels is the list in pixels; refusals name the key"

# --- the scan's transpose, mirror and rotation (numpy's formula, 0 iterations) --------------------
grep -v truth raw.ini > geo.ini
run_np 1 reconstruct geo.ini --solver.iterations 0 --data.scan_transpose true --data.scan_flip y \
    --data.scan_rotation 30 --output.file geo.h5 > geo.log || { cat geo.log; fail "scan geometry run"; }
/usr/bin/python3 - <<'PY' || fail "scan geometry"
import h5py, numpy as np
r, k = np.meshgrid(np.arange(6), np.arange(5), indexing="ij")
y, x = (k * 3.0).ravel(), (r * 3.0).ravel()   # transposed
y = -y                                          # y mirrored
t = np.radians(30)                              # counter-clockwise in the image (y down)
want = np.stack([y * np.cos(t) - x * np.sin(t), y * np.sin(t) + x * np.cos(t)], 1)
got = h5py.File("geo.h5")["positions"][...]
assert np.allclose(got, want, atol=1e-12), (got[:3], want[:3])
PY
ok "data.scan_transpose, scan_flip and scan_rotation give numpy's positions"
# Crop and bin: one line each; native positions scaled by the crop (the object pixel grows by 32 / 24).
# The data's dx_angstrom is the 32-pixel frames' object pixel: the geometry's grows by 32 / 24 too,
# the bright disc keeps its radius in detector pixels (half of it in the binned pixels), and the
# disc check sees no contradiction.
run_np 1 reconstruct fnative.ini --solver.iterations 0 --detector.crop 4,28,4,28 --detector.bin 2 \
    --output.file crop.h5 > crop.log 2> crop.err || { cat crop.log crop.err; fail "crop and bin run"; }
grep -q "^detector: crop rows 4..27, columns 4..27 of the 32 x 32 frames" crop.log &&
    grep -q "^detector: bin 2 x 2 -> 12 x 12 patterns" crop.log || { cat crop.log; fail "no crop or bin line"; }
grep -q "^geometry: object pixel 0.1992 A (f.h5: dx_angstrom x 32 / 24 for detector.crop), reciprocal pixel 0.4183 1/A = 17.49 mrad; .*bright-field disc radius 1.6 px" crop.log ||
    { cat crop.log; fail "no geometry line with the cropped object pixel"; }
! grep -q "bright-field disc has a radius" crop.err || { cat crop.err; fail "a disc warning on cropped data"; }
/usr/bin/python3 - <<'PY' || fail "crop and bin"
import h5py, numpy as np
o, f = h5py.File("crop.h5"), h5py.File("f.h5")
assert list(o["positions"].attrs["pattern_shape"]) == [12, 12], o["positions"].attrs["pattern_shape"]
assert np.allclose(o["positions"][...], f["positions"][...] * 24 / 32, atol=1e-12)
dx = f.attrs["dx_angstrom"] * 1e-10 * 32 / 24
assert abs(o["/object"].attrs["pixel_size"] / dx - 1) < 1e-12, (o["/object"].attrs["pixel_size"], dx)
lam = f.attrs["wavelength_angstrom"] * 1e-10
# a binned pattern pixel is 2 detector pixels: the angle 2 lambda / (32 dx_angstrom), as uncropped
assert abs(o["/probe"].attrs["reciprocal_pixel_mrad"] / (2e3 * lam / (32 * f.attrs["dx_angstrom"] * 1e-10)) - 1) < 1e-12
PY
ok "detector.crop and detector.bin: 32 x 32 frames -> 12 x 12 patterns, one line each, positions and the object pixel (dx_angstrom x 32 / 24) in the cropped pixels"

# --- malformed input: one line naming the file, exit 3 (data) or 2 (config) ----------------------
$W empad e.h5 rows.raw --rows 126 && $W empad e.h5 cut.raw --drop-bytes 1000 && $W empad e.h5 short.raw --frames 28 &&
    $W fourd f.h5 rank3.h5 6 5 /d --rank3 || fail "write malformed files"
printf 'previous result\n' > keep.h5
expect_error 3 "rows.raw: 1935360 bytes are 29 EMPAD frames .* and 5120 bytes more: a truncated file, or frames of another size" -- \
    "$EF" reconstruct raw.ini --data.file rows.raw --output.file keep.h5 --overwrite
expect_error 3 "cut.raw: .* bytes more: a truncated file" -- "$EF" reconstruct raw.ini --data.file cut.raw
expect_error 3 "short.raw: holds 28 EMPAD frames but data.scan_shape 6 x 5 asks for 30 \(a truncated file\?\)" -- \
    "$EF" reconstruct raw.ini --data.file short.raw
expect_error 3 "e.raw: holds 30 EMPAD frames but data.scan_shape 5 x 5 asks for 25" -- \
    "$EF" reconstruct raw.ini --data.scan_shape 5,5
expect_error 3 "cube.h5: no dataset '/nope' \(data.dataset\)" -- "$EF" reconstruct cube.ini --data.dataset /nope
expect_error 3 "rank3.h5: '/d' has rank 3 \(30 x 32 x 32\); a 4-D array" -- \
    "$EF" reconstruct cube.ini --data.file rank3.h5 --data.dataset /d
expect_error 3 "cube.h5: '/datacube_root/datacube/data' is a 6 x 5 scan but data.scan_shape says 5 x 6" -- \
    "$EF" reconstruct cube.ini --data.scan_shape 5,6
printf '1 2\n3 four\n' > bad.txt
expect_error 3 "bad.txt:2: expected two numbers 'y x'" -- "$EF" reconstruct cube.ini --data.positions bad.txt
grep -v scan_step raw.ini > nostep.ini
expect_error 2 "nostep.ini: data.scan_step: required for EMPAD raw data" -- "$EF" reconstruct nostep.ini
expect_error 2 "detector.crop 0,130,0,128 reaches beyond the 128 x 128 frames" -- \
    "$EF" reconstruct raw.ini --detector.crop 0,130,0,128
[ "$(cat keep.h5)" = "previous result" ] || fail "a refused run changed keep.h5"
ok "malformed EMPAD and 4-D files refused naming the file; the existing output untouched"

# --- detector preprocessing against the truth ----------------------------------------------------
"$EF" simulate ptycho --out a.h5 --scan 10 --dp 32 --modes 1 --dose 1e6 > sim.log || fail "simulate a.h5"
# hot.h5: pixel (5, 25), in the dark field, 10 x the mean pattern's peak in every frame; and
# pixel (16, 18), inside the bright disc, dead (0) in every frame.
$W hot a.h5 hot1.h5 5 25 10 && $W hot hot1.h5 hot.h5 16 18 0 && $W shift a.h5 shifted.h5 0 3 ||
    fail "write hot.h5, shifted.h5"
negatives=$($W background a.h5 bg.h5 2) || fail "write bg.h5"
printf '[data]\nfile = a.h5\n[model]\nmodes = 1\n[solver]\niterations = 40\n[output]\nfile = a_out.h5\npreviews = false\n' > a.ini
# nrmse NAME ARGS...: reconstruct into NAME.h5 (log NAME.log), print the phase NRMSE in %
nrmse() {
    local name=$1; shift
    run_np 1 reconstruct a.ini --output.file "$name.h5" "$@" > "$name.log" 2>&1 || { cat "$name.log"; fail "reconstruct $name"; }
    /usr/bin/python3 -c "import h5py; print('%.4f' % (100 * h5py.File('$name.h5').attrs['phase_nrmse']))"
}
clean=$(nrmse clean)
grep -q "^detector: mask: 0 hot and 0 dead pixels" clean.log || { cat clean.log; fail "pixels masked in clean data"; }
grep -q "within half a pixel of (16, 16), not shifted" clean.log || { cat clean.log; fail "clean data shifted"; }
masked=$(nrmse masked --data.file hot.h5)
unmasked=$(nrmse unmasked --data.file hot.h5 --detector.mask off --detector.center off)
grep -q "^detector: mask: 1 hot and 1 dead pixels" masked.log || { cat masked.log; fail "the hot and dead pixels not found"; }
awk -v c="$clean" -v m="$masked" -v u="$unmasked" 'BEGIN { exit !(m < c + 0.5 && u > 10 * c && u > 20) }' ||
    fail "hot pixel: clean $clean %, default mask $masked %, no mask $unmasked %"
ok "a hot pixel (10 x the peak) and a dead one: $masked % with the default mask, $unmasked % without (clean data $clean %)"
centred=$(nrmse centred --data.file shifted.h5)
uncentred=$(nrmse uncentred --data.file shifted.h5 --detector.center off)
grep -q "patterns shifted by whole pixels (+0, -3) to (16, 16)" centred.log || { cat centred.log; fail "beam not centred"; }
awk -v c="$clean" -v m="$centred" -v u="$uncentred" 'BEGIN { exit !(m < c + 0.5 && u > 20) }' ||
    fail "off-centre beam: clean $clean %, centred $centred %, not centred $uncentred %"
ok "a beam 3 px off centre: shifted back, $centred % (not centred: $uncentred %)"
nrmse clipped --data.file bg.h5 > /dev/null
grep -q "^ensemblefit: warning: bg.h5: $negatives negative counts (.* % of the pixels) set to 0 (detector.clip_negative)" clipped.log ||
    { cat clipped.log; fail "no warning of the $negatives negative counts numpy made"; }
/usr/bin/python3 -c "import h5py; assert h5py.File('masked.h5').attrs['detector_masked_pixels'] == 2"
ok "negative counts: $negatives (numpy's count) clipped with one warning"
