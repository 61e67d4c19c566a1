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
