#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Bad input: one clear error line naming the file and line, key or formula column, exit code 2
# (usage/config) or 3 (data), under mpirun too, and an existing output file left untouched.
# Then hostile input, class by class (issue 20): sizes this machine cannot hold, counts above
# 2^32, non-finite values, odd config lines, data that are not numbers, huge echoed values. Every
# refusal is checked by `refused`: the exit code, exactly one error line (OpenMPI's own noise
# aside) matching the pattern, no internal text (bad_alloc, substr, stod, an HDF5 call), and
# every file of the folder byte-identical afterwards with none added. Cases where MPI plays no
# part run as one process without mpirun, to keep the test fast.
source "$(dirname "$0")/../tools/mpi_common.sh"

# Checksums of every file here but the captured output: what a refused run must leave as it was.
snapshot() { find . -type f ! -name out.txt ! -name err.txt -print0 | sort -z | xargs -0 md5sum; }

# refused CODE PATTERN -- command...: expect_error's checks, exactly one 'ensemblefit: error' line
# of any form (also 'error on rank N'), no internal text, and the folder unchanged.
refused() {
    local before
    before=$(snapshot)
    expect_error "$@"
    local lines
    lines=$(grep -c '^ensemblefit: error' err.txt || true)
    [ "$lines" = 1 ] || { cat err.txt >&2; fail "wanted one error line of any form, got $lines: ${*:4}"; }
    ! grep -E -q 'bad_alloc|basic_string|substr|stod|stoi|HDF5 call failed|H5[A-Z][a-z]+[0-9]?\(' err.txt ||
        { cat err.txt >&2; fail "internal text reached the user: ${*:4}"; }
    [ "$(snapshot)" = "$before" ] || { diff <(echo "$before") <(snapshot) >&2; fail "the folder changed: ${*:4}"; }
}
write_line_problem
# A finished result that no failing run may damage.
run_np 2 fit good.ini > good.log
sum_before=$(md5sum out.h5)
variant() {  # variant NAME SED-EXPRESSION: good.ini edited
    sed -e "$2" good.ini > "$1.ini"
}

refused 2 "nope.ini: cannot open config file" -- run_np 2 fit nope.ini
variant missingdata 's/^file = data.csv/file = absent.csv/'
refused 2 "missingdata.ini:2: data.file: cannot open data file" -- run_np 2 fit missingdata.ini
variant section 's/^\[fit\]/[fitt]/'
refused 2 "section.ini:17: unknown section \[fitt\]" -- run_np 2 fit section.ini
variant key 's/^replicas = 5/replica = 5/'
refused 2 "key.ini:18: unknown key 'replica' in \[fit\]" -- run_np 2 fit key.ini
refused 2 "unknown option '--fit.replica'" -- run_np 1 fit good.ini --fit.replica 3
variant model 's/^name = formula/name = cubic/'
refused 2 "model.ini:8: model.name: unknown model 'cubic'" -- run_np 2 fit model.ini
variant syntax 's/^formula = a + b\*x/formula = a + b*(x/'
refused 2 "syntax.ini:9: model.formula: column 9: missing '\)'" -- run_np 2 fit syntax.ini
variant name 's/^formula = a + b\*x/formula = a + q*x/'
refused 2 "name.ini:9: model.formula: column 5: unknown name 'q'" -- run_np 2 fit name.ini
sed 's/^3,6.2,0.1/3,six,0.1/' data.csv > text.csv; variant text 's/data.csv/text.csv/'
refused 3 "text.csv:4: column 'y': not a number: 'six'" -- run_np 2 fit text.ini
variant column 's/^y = y/y = z/'
refused 3 "data.csv:1: no column 'z'" -- run_np 2 fit column.ini
sed 's/^2,3.9,0.1/2,nan,0.1/' data.csv > nan.csv; variant nan 's/data.csv/nan.csv/'
refused 3 "nan.csv:3: column 'y': NaN" -- run_np 2 fit nan.ini
sed 's/^4,7.8,0.1/4,7.8,0/' data.csv > zero.csv; variant zero 's/data.csv/zero.csv/'
refused 3 "zero.csv:5: column 's': uncertainties must be positive" -- run_np 2 fit zero.ini
variant sigma 's/^sigma = s/sigma = -0.5/'
refused 2 "sigma.ini:5: data.sigma: a constant sigma must be positive" -- run_np 2 fit sigma.ini
variant bounds '/^\[param.a\]/a lower = 3\nupper = 1'
refused 2 "bounds.ini:12: param.a.lower: lower bound 3 is above upper bound 1" -- run_np 2 fit bounds.ini
variant outside '/^\[param.b\]/a upper = 0.5'
refused 2 "outside.ini:16: param.b.start: start 1 is outside \[-inf, 0.5\]" -- run_np 2 fit outside.ini
refused 2 "--fit.replicas: must be in 0..2147483646, got -4" -- run_np 2 fit good.ini --fit.replicas -4
refused 2 "output.file: cannot write '/nonexistent/dir/out.h5'" -- \
    run_np 2 fit good.ini --output.file /nonexistent/dir/out.h5
refused 2 "out.h5' exists; pass --resume" -- run_np 2 fit good.ini
refused 2 "run.workers = gpu: (no CUDA device|ensemblefit was built without CUDA)" -- \
    run_np 2 fit good.ini --run.workers gpu --output.file gpu.h5
refused 2 "unknown parameter|has no parameter 'k'" -- \
    run_np 1 fit good.ini --model.name linear --param.k.start 1 --output.file lin.h5
refused 2 "does not appear in the formula" -- \
    run_np 1 fit good.ini --param.c.start 1 --output.file unused.h5
refused 2 "--shard: shard index 3 is outside 0..2" -- run_np 1 fit good.ini --shard 3/3
refused 2 "fit.precision: unknown precision 'half' \(allowed: double, float\)" -- \
    run_np 2 fit good.ini --fit.precision half --output.file half.h5
refused 2 "fit.solver: the QR solver runs in double only" -- \
    run_np 2 fit good.ini --fit.precision float --fit.solver qr --output.file half.h5
[ "$(md5sum out.h5)" = "$sum_before" ] || fail "a failing run changed out.h5"
ok "out.h5 untouched by every failing run"
for f in gpu.h5 lin.h5 unused.h5 half.h5; do [ ! -e "$f" ] || fail "a failing run created $f"; done


# --- Hostile input (issue 20): one process where MPI plays no part ---------------------------
EFS="$EF"  # a singleton MPI process: no mpirun start-up per case

# Sizes this machine cannot hold, named with the key and the largest that fits.
variant huge 's/^replicas = 5/replicas = 1e12/'
refused 2 "huge.ini:18: fit.replicas = 1e12 needs [0-9.]+ [kMGTPE]?B of memory for /replicas .* the largest this machine's memory \([0-9.]+ [kMGTPE]?B\) allows is [0-9]+ replicas" \
    -- "$EFS" fit huge.ini --dry-run
# 3e9 replicas: beyond one MPI message (or, on a smaller machine, beyond the memory first).
refused 2 "--fit.replicas(: must be in 0..2147483646, got 3e9| = 3e9 needs .* allows is [0-9]+ replicas)" -- \
    "$EFS" fit good.ini --fit.replicas 3e9 --dry-run
refused 2 "simulate dis: --points 2000000000 needs .* of memory .* allows is [0-9]+ points" -- \
    "$EFS" simulate dis --points 2e9 --out never.h5
refused 2 "simulate ptycho: --scan 1000000x1000000 needs .* of memory for the positions and the object" -- \
    "$EFS" simulate ptycho --scan 1e6 --dp 16 --out never.h5
refused 2 "simulate ptycho: --dp 1000000 needs .* of memory .* allows is --dp [0-9]+" -- \
    "$EFS" simulate ptycho --scan 4 --dp 1e6 --out never.h5
refused 2 "simulate ptycho: --object-size 1000000000 needs" -- \
    "$EFS" simulate ptycho --scan 4 --dp 16 --object-size 1e9 --out never.h5
/usr/bin/python3 - <<'PY'
import h5py, numpy as np
with h5py.File("rows.h5", "w") as f:  # declares 1e10 rows, stores none (chunked, unallocated)
    for n in ("x", "y", "s"):
        f.create_dataset(n, shape=(10**10,), dtype="f8", chunks=(4096,))
for name, y in (("str", np.array([b"a", b"b", b"c", b"d"])), ("cmp", np.zeros(4, dtype=[("a", "f8"), ("b", "i4")]))):
    with h5py.File(name + ".h5", "w") as f:
        f["x"] = np.arange(4.0); f["y"] = y; f["s"] = np.ones(4)
with h5py.File("vlen.h5", "w") as f:
    f["x"] = np.arange(4.0); f.create_dataset("y", (4,), dtype=h5py.vlen_dtype(np.float64)); f["s"] = np.ones(4)
PY
variant rows 's/data.csv/rows.h5/'
refused 3 "rows.h5: dataset 'x' declares 10000000000 rows: needs .* of memory for the data .* allows is [0-9]+ rows" \
    -- "$EFS" fit rows.ini --dry-run

# Counts above 2^32 wrap no more: one line naming the key and the allowed range.
refused 2 "--fit.max_iterations: must be in 1..2147483647, got 4294967297" -- \
    "$EFS" fit good.ini --fit.max_iterations 4294967297 --dry-run
variant order 's/^name = formula/name = polynomial\norder = 4294967296/'
refused 2 "order.ini:9: model.order: must be in 0..20, got 4294967296" -- "$EFS" fit order.ini --dry-run
refused 2 "--model.peaks: must be in 1..20, got 4294967297" -- \
    "$EFS" fit good.ini --model.name gaussian --model.peaks 4294967297 --dry-run
refused 2 "--fit.chunk: must be in 0..2147483647, got 4294967297" -- "$EFS" fit good.ini --fit.chunk 4294967297 --dry-run
variant threads 's/^\[output\]/[run]\nthreads = 100000\n[output]/'
refused 2 "threads.ini:21: run.threads: must be in 0..4096, got 100000" -- "$EFS" fit threads.ini --dry-run
refused 2 "OMP_NUM_THREADS = 100000: at most 4096 threads per rank" -- env OMP_NUM_THREADS=100000 "$EFS" fit good.ini --dry-run
refused 2 "--run.threads: must be in 0..4096, got 4294967297" -- "$EFS" fit good.ini --run.threads 4294967297 --dry-run
refused 2 "--fit.seed: must be in 0..9223372036854775807" -- "$EFS" fit good.ini --fit.seed 1e30 --dry-run
refused 2 "--shard: the shard count must be in 1..1073741824, got '0/4294967297'" -- \
    "$EFS" fit good.ini --shard 0/4294967297 --dry-run
refused 2 "simulate dis: --points: must be in 10..2147483647, got 4294967297" -- \
    "$EFS" simulate dis --points 4294967297 --out never.h5

# Non-finite and negative values, unknown arguments: refused, not accepted.
refused 2 "--debug.slowdown: expected RANK:FACTOR.* got '1:inf'" -- "$EFS" fit good.ini --debug.slowdown 1:inf --dry-run
refused 2 "--progress-interval: expected a number, got 'abc'" -- "$EFS" fit good.ini --progress-interval abc --dry-run
for dose in inf nan; do
    refused 2 "simulate ptycho: --dose: expected a number, got '$dose'" -- \
        "$EFS" simulate ptycho --scan 2 --dp 16 --dose $dose --out never.h5
done
refused 2 "simulate ptycho: --dose: must be >= 0, got -1" -- "$EFS" simulate ptycho --scan 2 --dp 16 --dose -1 --out never.h5
refused 2 "devices: unknown argument '--bogus'" -- "$EFS" devices --bogus

# Data that cannot be fitted as given: exit 3 naming the file and the column or the counts.
printf 'x,y,s,y\n1,2.1,0.1,5\n2,3.9,0.1,6\n' > dup.csv; variant dup 's/data.csv/dup.csv/'
refused 3 "dup.csv:1: column 'y' appears twice in the header \(columns 2 and 4\)" -- "$EFS" fit dup.ini --dry-run
printf 'x,y,s\n1,2.1,0.1\n' > one.csv; variant one 's/data.csv/one.csv/'
refused 3 "one.csv: 1 data row\(s\) for 2 free parameters" -- "$EFS" fit one.ini --dry-run
mkdir datadir
refused 2 "--data.file: cannot open data file 'datadir' \(it is a folder\)" -- "$EFS" fit good.ini --data.file datadir --dry-run
refused 3 "/dev/zero:1: line longer than 16777216 characters" -- "$EFS" fit good.ini --data.file /dev/zero --dry-run
for kind in str:strings cmp:"compound records" vlen:"variable-length sequences"; do
    variant "${kind%%:*}" "s/data.csv/${kind%%:*}.h5/"
    refused 3 "${kind%%:*}.h5: 'y' holds ${kind#*:}, not numbers" -- "$EFS" fit "${kind%%:*}.ini" --dry-run
done

# '#': a comment starts at a line start or after a blank; glued to a formula it is the formula's
# ('a + b*x#2' fails at its column, never cut silently to 'a + b*x').
variant hash 's/^formula = a + b\*x/formula = a + b*x#2/'
refused 2 "hash.ini:9: model.formula: column 8: unexpected character '#'" -- "$EFS" fit hash.ini --dry-run
variant comment 's/^formula = a + b\*x/formula = a + b*x # a straight line/'
"$EFS" fit comment.ini --dry-run --output.file never.h5 > comment.log || fail "an inline comment was refused"
grep -q "model:    formula: a + b\*x$" comment.log || { cat comment.log; fail "inline comment not cut"; }
ok "a blank-led '#' is a comment"

# Odd config lines: one clean line with FILE:LINE (no substr crash); ';=' is a comment.
variant semi 's/^\[fit\]/[fit]\n;=/'
"$EFS" fit semi.ini --dry-run --output.file never.h5 > /dev/null || fail "a ';=' comment line was refused"
variant noname 's/^\[fit\]/[fit]\n= 3/'
refused 2 "noname.ini:18: expected 'key = value', got no key before '='" -- "$EFS" fit noname.ini --dry-run
variant header 's/^\[fit\]/[fit/'
refused 2 "header.ini:17: malformed section header '\[fit'" -- "$EFS" fit header.ini --dry-run
mkdir folder.ini
refused 2 "folder.ini: cannot open config file \(it is a folder\)" -- "$EFS" fit folder.ini
# Starts with a letter: random bytes that begin with '#' or ';' (1 run in 128) are a comment line.
{ printf 'x'; head -c 200000 /dev/urandom | tr -d '\n'; } > noise.ini
refused 2 "noise.ini:1: " -- "$EFS" fit noise.ini
[ "$(wc -c < err.txt)" -lt 400 ] || fail "a binary config line was echoed whole"
# A huge value is cut to 80 characters in the message; a line over 1 MiB is not read whole.
long_name() { /usr/bin/python3 -c "import sys; sys.stdout.write(open('good.ini').read().replace('name = formula', 'name = ' + 'm' * $1))"; }
long_name 100000 > wide.ini
refused 2 "wide.ini:8: model.name: unknown model 'm{80}\.\.\.'" -- "$EFS" fit wide.ini --dry-run
[ "$(wc -c < err.txt)" -lt 400 ] || fail "a 100 kB value was echoed whole"
long_name 1100000 > endless.ini
refused 2 "endless.ini:8: line longer than 1048576 characters" -- "$EFS" fit endless.ini --dry-run

# A config error always says where: a dis-mellin setting out of range names its line.
cp "$SRC/inputs/dis-mellin.h5" .
sed 's/^q0 = .*/q0 = -3/' "$SRC/inputs/dis-mellin.ini" > q0.ini
line=$(grep -n '^q0 = ' q0.ini | cut -d: -f1)
refused 2 "q0.ini:$line: model.q0: -3 is out of range" -- "$EFS" fit q0.ini --dry-run --output.file never.h5

# Reconstruction inputs: a huge scan, positions far away, strings, NaN intensities (2 ranks: the
# error is agreed by every rank and printed once).
"$EFS" simulate ptycho --out sim.h5 --scan 6 --dp 16 --modes 1 > /dev/null
/usr/bin/python3 - <<'PY'
import h5py, numpy as np, shutil
for name, edit in (("nan", lambda f: f["data"].__setitem__((3, 2, 2), np.nan)),
                   ("far", lambda f: f["positions"].__setitem__((2, 0), 1e9))):
    shutil.copy("sim.h5", name + ".h5")
    with h5py.File(name + ".h5", "r+") as f:
        if "object_shape" in f.attrs: del f.attrs["object_shape"]
        edit(f)
with h5py.File("words.h5", "w") as f:
    f["data"] = np.array([[[b"a"] * 4] * 4] * 3); f["positions"] = np.zeros((3, 2))
with h5py.File("many.h5", "w") as f:
    f.create_dataset("data", shape=(10**10, 16, 16), dtype="f4", chunks=(1, 16, 16))
    f.create_dataset("positions", shape=(10**10, 2), dtype="f8", chunks=(1024, 2))
PY
printf '[data]\nfile = sim.h5\n[solver]\niterations = 2\nbatch_size = 8\n;=\n[output]\nfile = never.h5\npreviews = false\n' > r.ini
refused 3 "far.h5: '/positions' reach so far that the object is 1000000020 x [0-9]+ pixels; at most 1048576" -- \
    "$EFS" reconstruct r.ini --data.file far.h5
refused 3 "words.h5: '/data' holds strings, not numbers" -- "$EFS" reconstruct r.ini --data.file words.h5
refused 3 "many.h5: '/data' is 10000000000 x 16 x 16; at most 2147483647 patterns" -- \
    "$EFS" reconstruct r.ini --data.file many.h5
refused 3 "nan.h5: pattern 3 has a non-finite value" -- run_np 2 reconstruct r.ini --data.file nan.h5
for f in never.h5 gpu.h5 lin.h5 unused.h5 half.h5; do [ ! -e "$f" ] || fail "a failing run created $f"; done
ok "hostile input: every case one line, the right exit code, no file changed or added"

# More ranks than replicas is fine: idle ranks are reported.
run_np 4 fit good.ini --fit.replicas 1 --output.file few.h5 > few.log
grep -q "rank(s) had no replicas" few.log || fail "idle ranks not reported"
[ "$($H5CHECK status few.h5)" = "2 0" ] || fail "few.h5 incomplete"
ok "4 ranks, 2 fits: idle ranks reported, file complete"
echo "errors: all checks passed"
