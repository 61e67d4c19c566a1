#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Position correction with the defaults on issue 38's four simulated cases (docs/reconstruction.md,
# "Position correction": the table there was measured with this script on the 2-core machine):
# stored positions off by 1.4-2.0 px rms, the config only positions.correct = true. Prints, per
# case, the stored and the corrected positions' error (rms after removing the mean shift), the
# worst position and the run's travel-bound line.
#   perf/recon/position_cases.sh BINARY [RECONSTRUCT OPTIONS...]
#   e.g. perf/recon/position_cases.sh build/ensemblefit --run.workers gpu      (on a GPU)
#        perf/recon/position_cases.sh build/ensemblefit --positions.max_travel 0   (no bound)
# Runs in a temporary folder (kept when KEEP=1); MPIEXEC="mpirun -np 2" runs each on 2 ranks.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BINARY [RECONSTRUCT OPTIONS...]" >&2; exit 2; }
EF=$(readlink -f "$1")
shift
dir=$(mktemp -d)
[ "${KEEP:-0}" = 1 ] && echo "folder: $dir" || trap 'rm -rf "$dir"' EXIT
cd "$dir"
# name scan pattern-size error seed (the seeds that docs/reconstruction.md's numbers come from)
while read -r name scan dp err seed; do
    "$EF" simulate ptycho --out "$name.h5" --scan "$scan" --dp "$dp" --modes 1 --dose 1e7 --position-error "$err" \
        --seed "$seed" > "$name.sim.log"
    printf '[data]\nfile = %s.h5\n[positions]\ncorrect = true\n[output]\nfile = %s_out.h5\npreviews = false\n' \
        "$name" "$name" > "$name.ini"
    ${MPIEXEC:-} "$EF" reconstruct "$name.ini" "$@" > "$name.log"
    /usr/bin/python3 - "$name" "$scan x $scan, $dp px, --position-error $err --seed $seed" <<'PY'
import h5py, numpy as np, sys
s = h5py.File(sys.argv[1] + ".h5", "r")
t = s["/truth/positions"][...]
def err(p):
    d = p - t
    d -= d.mean(0)  # a global shift is not determined
    return np.hypot(*d.T)
b, a = err(s["/positions"][...]), err(h5py.File(sys.argv[1] + "_out.h5", "r")["/positions"][...])
w = int(a.argmax())
print(f"{sys.argv[2]}: {np.sqrt((b ** 2).mean()):.3f} -> {np.sqrt((a ** 2).mean()):.3f} px rms "
      f"(median {np.median(a):.3f}, worst #{w} {a[w]:.2f}, stored {b[w]:.2f} off)")
PY
    grep "^positions: [0-9n]" "$name.log" | sed 's/^/    /' || true
done <<'CASES'
a 12 32 1 7
b 12 32 1.4 8
c 16 64 1 9
d 16 64 1.4 10
CASES
