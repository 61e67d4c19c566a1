#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Output at the speed of the disk (issue #27): the whole process, as a user times it, of many
# spot fits (inputs/spot.ini with the compiled gaussian2d, solver = normal, float; results in the
# HDF5 file), before (the merge base, built in a tree of its own) and after (this tree), in one
# run, alternating, REPEATS times each. Prints and stores per run: wall seconds (/usr/bin/time),
# fits/s over the whole process, and where the output's time went (from /timing and the set-up
# trace): creating the file, rank 0's io phase (waiting for the writer, the summary, the
# timing) and the writes beside the fit (before: the dispatcher's stores; after: the writer
# thread). Checks that both files hold bitwise the same /central, /replicas and /summary.
#
# usage: perf/output/bench_output.sh [REPLICAS (default 1000000)] [REPEATS (default 2)]
#   AFTER=bin       the ensemblefit to measure (default build/ensemblefit)
#   BEFORE=bin      the one to compare with (default: BASE built in build-base/tree, CUDA=$CUDA)
#   BASE=rev        default: git merge-base HEAD main
#   WORKERS=cpu|gpu default auto; PRECISION=float|double default float;
#   EXTRA="..." more fit arguments (--fit.max_iterations 1 makes the run output-bound on a CPU);
#   OUT=dir keeps the files (default a temporary folder)
# On the GPU machine (both programs built with CUDA), for example:
#   BEFORE=base/build/ensemblefit AFTER=build/ensemblefit WORKERS=gpu perf/output/bench_output.sh 1000000 3
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
R=${1:-1000000}
N=${2:-2}
case "$R$N" in ''|*[!0-9]*) echo "usage: $0 [REPLICAS] [REPEATS]" >&2; exit 2 ;; esac
PY=/usr/bin/python3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
AFTER=${AFTER:-$root/build/ensemblefit}
if [ -z "${BEFORE:-}" ]; then
    BASE=${BASE:-$(git merge-base HEAD main)}
    rev=$(git rev-parse "$BASE")
    tree=$root/build-base/tree
    if [ "$(cat "$tree/.rev" 2>/dev/null)" != "$rev" ]; then
        rm -rf "$tree" && mkdir -p "$tree"
        git archive "$rev" | tar -x -C "$tree"
        echo "$rev" > "$tree/.rev"
    fi
    if [ ! -x "$tree/build/ensemblefit" ]; then
        cmake -S "$tree" -B "$tree/build" -DENSEMBLEFIT_CUDA="${CUDA:-OFF}" -DEF_BUILD_TESTS=OFF > /dev/null
        cmake --build "$tree/build" -j"$(nproc)" --target ensemblefit > /dev/null
    fi
    BEFORE=$tree/build/ensemblefit
fi
for b in "$BEFORE" "$AFTER"; do [ -x "$b" ] || { echo "no $b (build first)" >&2; exit 2; }; done
OUT=${OUT:-$(mktemp -d /tmp/ef-output-bench.XXXXXX)}
mkdir -p "$OUT" perf/output/results
cp inputs/spot.ini inputs/spot.csv "$OUT/"
model=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
slug=$(echo "${gpu:-$model}" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | sed 's/-$//')-$(nproc --all)core
day=$(date +%F)
json=perf/output/results/$slug-$day.json
k=2; while [ -e "$json" ]; do json=perf/output/results/$slug-$day-$k.json; k=$((k + 1)); done
echo "output benchmark: ${gpu:-$model}, $(nproc --all) cores, $day; $R spot fits, $N x before/after; files in $OUT"

args=(fit spot.ini --fit.replicas "$R" --model.name gaussian2d --fit.solver normal --fit.precision "${PRECISION:-float}"
      --overwrite --progress-interval 1000)
[ -n "${WORKERS:-}" ] && args+=(--workers "$WORKERS")
# shellcheck disable=SC2206  # EXTRA is split into words on purpose
[ -n "${EXTRA:-}" ] && args+=($EXTRA)
for rep in $(seq 1 "$N"); do
    for which in before after; do
        bin=$BEFORE; [ "$which" = after ] && bin=$AFTER
        name=$which$rep
        sync
        l0=$(cut -d' ' -f1-3 /proc/loadavg)
        (cd "$OUT" && EF_SETUP_TRACE=1 /usr/bin/time -f '%e %U %S %M' -o "$name.time" \
            "$bin" "${args[@]}" --output.file "$name.h5" > "$name.log" 2>&1) || {
            echo "FAILED: $bin" >&2; tail -20 "$OUT/$name.log" >&2; exit 1; }
        echo "$l0 | $(cut -d' ' -f1-3 /proc/loadavg)" > "$OUT/$name.load"
        echo "  $name: $(cut -d' ' -f1 "$OUT/$name.time") s wall, load $(cat "$OUT/$name.load")"
    done
done

"$PY" - "$OUT" "$R" "$N" "${gpu:-$model}" "$day" "$json" "${EXTRA:+EXTRA=\"$EXTRA\" }$0 $*" "$BEFORE" "$AFTER" \
    "${PRECISION:-float}" <<'EOF'
import json, re, subprocess, sys
import h5py, numpy as np

out, R, N, device, day, path, cmd, before, after, precision = sys.argv[1:]
R, N = int(R), int(N)

def run(name):
    wall, user, sys_, rss = open(f"{out}/{name}.time").read().split()
    log = open(f"{out}/{name}.log").read()
    m = re.search(r"\[setup rank 0\] output file: ([0-9.]+) s", log)
    with h5py.File(f"{out}/{name}.h5", "r") as f:
        t = f["/timing"]
        a = t.attrs
        d = {"wall_s": float(wall), "user_s": float(user), "sys_s": float(sys_), "max_rss_kb": int(rss),
             "fits_per_second": (R + 1) / float(wall),
             "create_output_s": float(m[1]) if m else None,
             "setup_s": float(t["setup"][0]), "compute_s": float(t["compute"][0]), "io_s": float(t["io"][0]),
             "idle_s": float(t["idle"][0]),
             "dispatcher_io_s": float(a["dispatcher_io_seconds"]),
             "writer_s": float(a["writer_seconds"]) if "writer_seconds" in a else None,
             "writer_blocks": int(a["writer_blocks"]) if "writer_blocks" in a else None,
             "loadavg_before_after": open(f"{out}/{name}.load").read().strip()}
    blocking = (d["create_output_s"] or 0.0) + d["io_s"]
    d["output_blocking_s"] = blocking
    d["output_share"] = blocking / d["wall_s"]
    d["output_beside_fit_s"] = d["writer_s"] if d["writer_s"] is not None else d["dispatcher_io_s"]
    return d

runs = {f"{w}{k}": run(f"{w}{k}") for k in range(1, N + 1) for w in ("before", "after")}
def bits_equal(a, b):
    with h5py.File(a, "r") as x, h5py.File(b, "r") as y:
        for g in ("/central", "/replicas", "/summary"):
            for k in x[g]:
                u, v = np.asarray(x[f"{g}/{k}"][()]), np.asarray(y[f"{g}/{k}"][()])
                if u.shape != v.shape or u.tobytes() != v.tobytes():
                    return False
    return True
same = bits_equal(f"{out}/before1.h5", f"{out}/after1.h5")
best = {w: min((v for k, v in runs.items() if k.startswith(w)), key=lambda v: v["wall_s"]) for w in ("before", "after")}
git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
res = {"benchmark": f"{R} spot fits (inputs/spot.ini, gaussian2d, solver normal, {precision}), whole process",
       "device": device, "date": day, "command": cmd.strip(), "git_head": git, "before": before, "after": after,
       "datasets_bitwise_equal": same, "runs": runs,
       "best_fits_per_second": {w: best[w]["fits_per_second"] for w in best}}
json.dump(res, open(path, "w"), indent=2)
print(f"{'run':8s} {'wall s':>7s} {'fits/s':>9s} {'create s':>8s} {'io s':>6s} {'compute s':>9s} "
      f"{'beside s':>8s} {'out share':>9s}  load before | after")
for k, d in runs.items():
    print(f"{k:8s} {d['wall_s']:7.2f} {d['fits_per_second']:9.3g} {d['create_output_s'] or 0:8.3f} {d['io_s']:6.3f} "
          f"{d['compute_s']:9.3f} {d['output_beside_fit_s']:8.3f} {100 * d['output_share']:8.1f}%  "
          f"{d['loadavg_before_after']}")
print(f"best: before {best['before']['fits_per_second']:.3g} fits/s, after {best['after']['fits_per_second']:.3g} fits/s "
      f"({best['after']['fits_per_second'] / best['before']['fits_per_second']:.2f}x); "
      f"/central, /replicas, /summary bitwise equal: {same}")
print(f"raw: {path}")
EOF
