#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Coverage of the truth by the central fit's 68 % errors with correlated systematics: DATASETS
# pseudo-datasets from `simulate dis` (each with its own draw of 3 systematic sources, 2
# normalised datasets and the point-by-point noise, made independently of the fit's Cholesky
# factor), each fitted at the given order with replicas = 0 from starts at the truth (so t0 =
# the true prediction), the valence c and d fixed (9 free parameters); counts
# |p - truth| <= sqrt(C_pp) over the free parameters.
#   perf/dis/coverage.sh BUILD_DIR [DATASETS=500] [POINTS=300] [ORDER=NLO] [JOBS=2]
# Writes perf/dis/results/coverage-HOST.json and prints the table for perf/RESULTS.md.
set -euo pipefail
BUILD=${1:?usage: coverage.sh BUILD_DIR [DATASETS] [POINTS] [ORDER] [JOBS]}
DATASETS=${2:-500}
POINTS=${3:-300}
ORDER=${4:-NLO}
JOBS=${5:-2}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
EF=$(cd "$BUILD" && pwd)/ensemblefit
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ef-coverage.XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1

# The fit config: inputs/dis-mellin.ini with every start at the built-in truth and ORDER.
/usr/bin/python3 - "$SRC/inputs/dis-mellin.ini" "$WORK/fit.ini" "$ORDER" <<'PY'
import re, sys
truth = {"uv_a": -0.45, "uv_b": 3.2, "uv_c": 0.5, "uv_d": 3.0, "dv_a": -0.4, "dv_b": 4.5, "dv_c": 0.5,
         "dv_d": 2.0, "sea_N": 0.16, "sea_a": -1.15, "sea_b": 8.0, "sea_c": 0.0, "sea_d": 0.0,
         "g_a": -0.9, "g_b": 5.0, "g_c": 0.0, "g_d": 0.0}
out, section = [], ""
for line in open(sys.argv[1]):
    m = re.match(r"\[param\.(\w+)\]", line)
    if line.startswith("["): section = m.group(1) if m else ""
    if section and line.startswith("start ="):
        line = f"start = {truth[section]}\n"
        # The valence c, d are held at the truth: with them free the a, c, d of a flavour are
        # correlated to 0.99+ and the linearised errors do not describe the scatter (the
        # uncorrelated fit over-covers as much), which is not what this study measures.
        if section in ("uv_c", "uv_d", "dv_c", "dv_d"): line += "fixed = true\n"
    if line.startswith("fixed =") and section in ("uv_c", "uv_d", "dv_c", "dv_d"): continue
    if line.startswith("order ="): line = f"order = {sys.argv[3]}\n"
    if line.startswith("replicas ="): line = "replicas = 0\n"
    if line.startswith("file = dis-mellin.h5"): line = "file = data.h5\n"
    out.append(line)
open(sys.argv[2], "w").write("".join(out))
PY
grep -q "^systematics" "$WORK/fit.ini" || { echo "inputs/dis-mellin.ini has no systematics" >&2; exit 2; }

one() {  # one dataset: simulate, fit, print the folder
    local t=$1 d="$WORK/d$1"
    mkdir -p "$d"
    sed -e "s|^file = data.h5|file = $d/data.h5|" "$WORK/fit.ini" > "$d/fit.ini"
    "$EF" simulate dis --out "$d/data.h5" --points "$POINTS" --seed "$((1000 + t))" --order "$ORDER" \
        --syst 3 --syst-size 0.015 --datasets 2 --norm-sigma 0.02 > /dev/null
    "$EF" fit "$d/fit.ini" --output.file "$d/fit.h5" --run.threads 1 > "$d/fit.log" 2>&1
}
export -f one
export EF WORK POINTS ORDER
start=$(date +%s)
seq 1 "$DATASETS" | xargs -P "$JOBS" -I{} bash -c 'one {}'
seconds=$(( $(date +%s) - start ))

mkdir -p "$SRC/perf/dis/results"
/usr/bin/python3 - "$WORK" "$DATASETS" "$POINTS" "$ORDER" "$seconds" "$SRC/perf/dis/results/coverage-$(hostname).json" <<'PY'
import glob, json, math, sys
import h5py, numpy as np
work, datasets, points, order, seconds, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6]
hits, total, per, failed, pulls = 0, 0, {}, 0, {}
for t in range(1, datasets + 1):
    with h5py.File(f"{work}/d{t}/data.h5") as d, h5py.File(f"{work}/d{t}/fit.h5") as f:
        truth = d.attrs["truth"]
        names = [n.decode() if isinstance(n, bytes) else n for n in f["/replicas/params"].attrs["param_names"]]
        if int(f["/central/status"][()]) != 0:
            failed += 1
            continue
        p, cov = f["/central/params"][()], f["/central/covariance"][()]
        for q, name in enumerate(names):
            var = cov[q, q]
            if not (var > 0):  # a fixed parameter
                continue
            hit = abs(p[q] - truth[q]) <= math.sqrt(var)
            pulls.setdefault(name, []).append((p[q] - truth[q]) / math.sqrt(var))
            hits += hit
            total += 1
            per.setdefault(name, [0, 0])
            per[name][0] += hit
            per[name][1] += 1
cov = hits / total
result = {"datasets": datasets, "points": points, "order": order, "systematics": 3, "normalised_datasets": 2,
          "failed_central_fits": failed, "intervals": total, "coverage": cov,
          "binomial_sigma": math.sqrt(0.6827 * 0.3173 / total),
          "per_parameter": {k: v[0] / v[1] for k, v in per.items()},
          "pull_mean": {k: float(np.mean(v)) for k, v in pulls.items()},
          "pull_std": {k: float(np.std(v)) for k, v in pulls.items()}, "seconds": seconds}
json.dump(result, open(out, "w"), indent=2)
print(f"coverage {100 * cov:.1f} % of {total} intervals ({datasets} datasets x free parameters; "
      f"68.3 % expected, binomial sigma {100 * result['binomial_sigma']:.1f} %), {failed} failed fits, {seconds} s")
for k, v in result["per_parameter"].items():
    print(f"  {k:6s} {100 * v:5.1f} %   pulls: mean {result['pull_mean'][k]:+.2f}, std {result['pull_std'][k]:.2f}")
PY
