# SPDX-License-Identifier: MIT
# Shared by the MPI test scripts: $1 = ensemblefit binary, $2 = mpiexec.
set -euo pipefail
EF=$1
MPIEXEC=${2:-mpirun}
SRC=${EF_SOURCE_DIR:?EF_SOURCE_DIR must point at the source tree}
H5CHECK="/usr/bin/python3 $SRC/tests/tools/h5check.py"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ef-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
run_np() { local np=$1; shift; "$MPIEXEC" --oversubscribe -np "$np" "$EF" "$@"; }

# kill_run PID: kill -9 a background mpirun (started as `setsid bash -c "exec mpirun ..."`) and its
# ranks (its children, each in a process group of its own), by process id.
kill_run() {
    local ranks
    ranks=$(pgrep -P "$1" || true)
    kill -9 $ranks "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    for r in $ranks; do while kill -0 "$r" 2>/dev/null; do sleep 0.05; done; done
}
# kill_when_caught PID FILE PROBE: polls `PROBE FILE` (which prints "DONE WRITTEN": rows with a
# status, rows written without one yet) every 50 ms, for at most 30 s, until both are >= 1: a
# write caught in progress. Then (or after the 30 s) kill_run PID; fails (1) if never caught.
kill_when_caught() {
    local pid=$1 file=$2 probe=$3 caught=1 done written
    for _ in $(seq 1 600); do
        sleep 0.05
        [ -e "$file" ] || continue
        read -r done written < <("$probe" "$file")
        if [ "${done:-0}" -ge 1 ] && [ "${written:-0}" -ge 1 ]; then caught=0; break; fi
    done
    kill_run "$pid"
    return $caught
}

# expect_error CODE PATTERN -- command...: the command must exit with CODE and print PATTERN
# (a grep -E pattern) on stderr as a single 'ensemblefit: error:' line.
expect_error() {
    local code=$1 pattern=$2; shift 3
    local rc=0
    "$@" >out.txt 2>err.txt || rc=$?
    [ "$rc" = "$code" ] || { cat err.txt >&2; fail "exit code $rc, wanted $code: $*"; }
    local lines
    lines=$(grep -c '^ensemblefit: error:' err.txt || true)
    [ "$lines" = 1 ] || { cat err.txt >&2; fail "wanted one error line, got $lines: $*"; }
    grep -E -q -e "$pattern" err.txt || { cat err.txt >&2; fail "message does not match '$pattern': $*"; }
    ok "exit $code, $(grep '^ensemblefit: error:' err.txt)"
}

# write_line_problem: data.csv (4 points on a line) and good.ini, a 5-replica straight-line fit
# into out.h5: the smallest valid problem, for tests that break one thing at a time.
write_line_problem() {
    cat > data.csv <<'CSV'
x,y,s
1,2.1,0.1
2,3.9,0.1
3,6.2,0.1
4,7.8,0.1
CSV
    cat > good.ini <<'INI'
[data]
file = data.csv
x = x
y = y
sigma = s

[model]
name = formula
formula = a + b*x

[param.a]
start = 0

[param.b]
start = 1

[fit]
replicas = 5

[output]
file = out.h5
INI
}

# write_peaks_problem POINTS REPLICAS CHUNK OUTPUT: peaks.csv (three Gaussian peaks on a
# constant, x in [0, 10), noise 0.2, seeded) and peaks.ini, a 10-parameter gaussian fit slow
# enough (~10 ms per replica) to kill mid-run or to balance.
write_peaks_problem() {
    /usr/bin/python3 - "$1" <<'PY'
import math, random, sys
n = int(sys.argv[1])
rng = random.Random(5)
with open("peaks.csv", "w") as f:
    f.write("x,y\n")
    for i in range(n):
        x = 10.0 * i / n
        y = 1 + 5*math.exp(-0.5*((x-3)/0.4)**2) + 3*math.exp(-0.5*((x-5)/0.6)**2) + 4*math.exp(-0.5*((x-7.5)/0.3)**2)
        f.write(f"{x},{y + rng.gauss(0, 0.2)}\n")
PY
    cat > peaks.ini <<INI
[data]
file = peaks.csv
x = x
y = y
sigma = 0.2
[model]
name = gaussian
peaks = 3
[param.c]
start = 0.5
[param.a1]
start = 4
[param.mu1]
start = 3.2
[param.s1]
start = 0.5
lower = 0.01
[param.a2]
start = 2
[param.mu2]
start = 4.8
[param.s2]
start = 0.5
lower = 0.01
[param.a3]
start = 3
[param.mu3]
start = 7.4
[param.s3]
start = 0.4
lower = 0.01
[fit]
replicas = $2
chunk = $3
[output]
file = $4
INI
}
