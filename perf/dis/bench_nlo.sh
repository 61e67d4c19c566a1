#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# NLO against LO fit time (issue #24: NLO fit time per replica within 1.2x of LO, set-up
# reported separately). The same data and replicas (inputs/dis-mellin.ini: 5000 F2 points with
# correlated systematics) fitted at [model] order = LO, NLO, and NLO with the split sea
# (perf/dis/make_split_config.sh: ubar, dbar, s + sbar shapes, 16 free parameters), one rank.
# Per run: set-up seconds (the phase `setup`: config, data, the Mellin tables, which is where
# NLO costs) and fit seconds per replica (the phase `compute` / fits), both from the run's
# /timing through `ensemblefit report --csv` (no python: the GPU machine has none), and the
# ratio of each fit time per replica to LO's.
#
# usage: perf/dis/bench_nlo.sh [--gpu] [REPLICAS (default 64)]
#   --gpu: [run] workers = gpu (one GPU; the batched Gram path); default the CPU worker.
#   BIN=path/to/ensemblefit overrides build/ensemblefit; WORK=dir keeps the run's files there;
#   THREADS=n sets [run] threads (default 1 on the CPU).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
R=64
workers=cpu
for a in "$@"; do
    case "$a" in
        --gpu) workers=gpu ;;
        ''|*[!0-9]*) echo "usage: $0 [--gpu] [REPLICAS]" >&2; exit 2 ;;
        *) R=$a ;;
    esac
done
BIN=${BIN:-$root/build/ensemblefit}
[ -x "$BIN" ] || { echo "no $BIN (build first)" >&2; exit 2; }
THREADS=${THREADS:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WORK=${WORK:-$(mktemp -d /tmp/dis-nlo.XXXXXX)}
mkdir -p "$WORK"
cp "$root/inputs/dis-mellin.ini" "$WORK/sym.ini"
cp "$root/inputs/dis-mellin.h5" "$WORK/"
bash "$root/perf/dis/make_split_config.sh" "$WORK/sym.ini" "$WORK/split.ini"
echo "dis-mellin NLO vs LO: $R replicas (+ central), workers $workers, threads $THREADS; $(date -u +%FT%TZ)"
echo "host: $(hostname), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); files in $WORK"
common=(--fit.replicas "$R" --run.workers "$workers" --run.threads "$THREADS" --overwrite)
run() {  # name config order
    local name=$1 cfg=$2 order=$3
    "$BIN" fit "$WORK/$cfg" --model.order "$order" --output.file "$WORK/$name.h5" "${common[@]}" \
        > "$WORK/$name.log" 2>&1 || { tail -20 "$WORK/$name.log" >&2; echo "FAILED: $name" >&2; exit 1; }
    "$BIN" report "$WORK/$name.h5" --csv "$WORK/$name.csv" > /dev/null
}
run lo sym.ini LO
run nlo sym.ini NLO
run nlo_split split.ini NLO
run lo_split split.ini LO
# CSV columns: file,ranks,workers,policy,wall_s,...,setup,compute,comm,sync,sched,idle,io (shares)
fits=$((R + 1))
awk -F, -v fits="$fits" -v w="$workers" '
    FNR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
    {
        name = FILENAME; sub(/.*\//, "", name); sub(/\.csv$/, "", name)
        wall = $col["wall_s"]; setup = wall * $col["setup"]; fit = wall * $col["compute"] / fits
        if (name == "lo") lo = fit
        order[++n] = name; S[name] = setup; F[name] = fit; W[name] = wall
    }
    END {
        printf "%-10s %-4s %10s %10s %16s %10s\n", "run", "dev", "wall_s", "setup_s", "fit_s/replica", "vs LO"
        for (k = 1; k <= n; ++k) {
            m = order[k]
            printf "%-10s %-4s %10.3f %10.3f %16.5f %10.3f\n", m, w, W[m], S[m], F[m], F[m] / lo
        }
    }' "$WORK/lo.csv" "$WORK/nlo.csv" "$WORK/nlo_split.csv" "$WORK/lo_split.csv"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
