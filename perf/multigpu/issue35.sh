#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Issue #35's whole table in one device call on the GPU node (4 GPUs, 64 cores; repository root,
# the bundle of `perf/recon/gpu_run.sh prepare` carried as .gpu-run: MPI, HDF5 and the programs),
# every figure the whole command's wall seconds (date +%s.%N around timeout + mpirun):
#   stats2     stats2 at 25,600 replicas on 1, 2, 4 GPUs (one rank per GPU)
#   spot       the spot ensemble at 1e8 replicas on 1, 2, 4 GPUs (gaussian2d, normal, float), and
#              the disk's write bandwidth in the output folder (dd conv=fdatasync) to set the
#              output phase against
#   mixed      stats2 at 25,600 on 4 GPU ranks + 60 CPU ranks, weighted, against the 4 GPUs alone;
#              /replicas compared bit for bit
#   ptycho     the tBL-WSe2-shaped reconstruction, 200 iterations, on 1, 2, 4 GPUs; /object
#              compared bit for bit with one GPU's
#   spot1      the spot ensemble at 1e7 replicas on 1 GPU, 3 times, alternating with 3 runs of the
#              minimal peer (perf/peers/spot_minimal.cu: generate, batched LM, fwrite + fsync; no
#              MPI), both whole commands; one line "spot1: ensemblefit T s (median of 3), minimal
#              peer T s (median of 3); peer means against ensemblefit's ..." (spot_compare.py)
#   cpuweak    stats2 on 1, 2, 4 ... 64 CPU ranks (--bind-to core), 40 replicas per rank
#   stats2big  stats2 at 256,000 replicas on 1, 2, 4 GPUs
#   cpustrong  stats2 at R_STRONG replicas on 1, 2, 4 ... 64 CPU ranks (--bind-to core; the
#              counts: STRONG_COUNTS); the 1-rank baseline first, then the largest counts
# Sections run in this order (the most telling first, the slowest last); SECTIONS="a b ..."
# picks some. Each run has a `timeout` (its section's cap, never more than what is left of
# BUDGET_S, default 525 s for the whole script); a run that would not fit is written as skipped,
# one that ran out as timeout: never estimated.
#
# Time on the node (tree b4577df's figures of issue 35): stats2 ~25 s, spot ~100 s, mixed ~25 s,
# ptycho ~100 s with the simulation, spot1 ~5 s a run of ensemblefit (with the peer's runs and
# the warm-ups, 8 runs: not yet timed), cpuweak ~90 s, stats2big ~160 s (1 GPU fits
# ~3,000 stats2 replicas/s), cpustrong ~430 s at R_STRONG=1280 (one CPU rank fits ~6.5 stats2
# replicas/s, so the 1-rank baseline alone takes ~200 s; at the issue's 2,560 it takes ~400 s,
# the whole series ~800 s: more than one device call). The whole table therefore takes two calls:
#   SECTIONS="stats2 spot mixed ptycho spot1 stats2big" bash perf/multigpu/issue35.sh   # ~420 s
#   SECTIONS="cpuweak cpustrong" bash perf/multigpu/issue35.sh                          # ~520 s
# and R_STRONG=2560 STRONG_COUNTS="1 64 32 16" (then "8 4 2") for the issue's size. Run
# `ensemblefit report` over both calls' timing/ folders together afterwards (the mixed run
# against a CPU rank's throughput needs cpustrong_*_c1 or cpuweak_*_c1 beside it).
#
#   bash perf/multigpu/issue35.sh                 # on the GPU node, .gpu-run carried
#   REHEARSE=1 bash perf/multigpu/issue35.sh      # here: build/ensemblefit, CPU workers standing
#                                                 # in for GPUs, tiny sizes; its numbers are NOT
#                                                 # results, it checks the script end to end
# Writes to $OUT (else perf/multigpu/out35): issue35.tsv (printed at the end too: run, gpus,
# cpu_ranks, replicas, seconds, efficiency against the series' 1-unit run (strong: T1/(N TN),
# weak: T1/TN, mixed: the 4 GPUs alone / this), load balance, set-up and io (the slowest rank's
# seconds), note), progress.log, logs/NAME.log (each run's output), timing/NAME.h5 (each run's
# /timing: `ensemblefit report timing/stats2_25600_g*.h5` works on them afterwards),
# timing/NAME.h5.timing.json (a fit's sidecar) and reports/SERIES.{txt,csv} (report per series).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
SRC=$PWD
REHEARSE=${REHEARSE:-0}
OUT=${OUT:-$SRC/perf/multigpu/out35}
mkdir -p "$OUT/logs" "$OUT/timing" "$OUT/reports"
W=$(mktemp -d "${WORKDIR:-/tmp}/ef-issue35.XXXXXX")
T_START=$(date +%s)
BUDGET_S=${BUDGET_S:-525}
source perf/recon/bench_config.sh
if [ "$REHEARSE" = 1 ]; then
    export PATH=${EF_BUILD_DIR:-$SRC/build}:$PATH
    py() { /usr/bin/python3 "$@"; }
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    NGPU=0 WORKERS=cpu
    GPU_COUNTS=(1 2) CPU_COUNTS=(1 2 4) MIX_G=2 MIX_C=2
    : "${R_STATS2:=8}" "${R_STATS2_BIG:=16}" "${R_SPOT:=5000}" "${R_SPOT1:=2000}" "${R_WEAK:=2}" "${R_STRONG:=8}"
    : "${ITERS:=3}" "${DD_MB:=64}"
    CPU_BIND="--bind-to none" CAP=120
    : "${CAP_STATS2:=$CAP}" "${CAP_SPOT:=$CAP}" "${CAP_MIXED:=$CAP}" "${CAP_PTYCHO:=$CAP}" "${CAP_CPU:=$CAP}"
    : "${CAP_BIG:=$CAP}" "${CAP_STRONG:=$CAP}"
else
    source .gpu-run/env.sh
    gpu_machine_env
    NGPU=$(nvidia-smi -L | wc -l) WORKERS=gpu
    GPU_COUNTS=()
    for g in 1 2 4; do [ "$g" -le "$NGPU" ] && GPU_COUNTS+=("$g"); done
    CPU_COUNTS=()
    for c in 1 2 4 8 16 32 64; do [ "$c" -le "$(nproc)" ] && CPU_COUNTS+=("$c"); done
    MIX_G=${GPU_COUNTS[-1]} MIX_C=$(( $(nproc) - ${GPU_COUNTS[-1]} ))
    : "${R_STATS2:=25600}" "${R_STATS2_BIG:=256000}" "${R_SPOT:=100000000}" "${R_SPOT1:=10000000}"
    : "${R_WEAK:=40}" "${R_STRONG:=1280}" "${ITERS:=200}" "${DD_MB:=4096}"
    CPU_BIND="--bind-to core"
    : "${CAP_STATS2:=60}" "${CAP_SPOT:=120}" "${CAP_MIXED:=90}" "${CAP_PTYCHO:=120}" "${CAP_CPU:=60}"
    : "${CAP_BIG:=240}" "${CAP_STRONG:=480}"
fi
# Sizes (R_*, ITERS, DD_MB) and per-run caps (CAP_*) may be set from outside.
export EF_NGPU=$NGPU
MPI="mpirun --oversubscribe"
SECTIONS=${SECTIONS:-stats2 spot mixed ptycho spot1 cpuweak stats2big cpustrong}
TSV=$OUT/issue35.tsv
printf 'run\tgpus\tcpu_ranks\treplicas\tseconds\tefficiency\tload_balance\tsetup\tio\tnote\n' > "$TSV"
say() { echo "[issue35 $(( $(date +%s) - T_START ))s] $*"; }
left() { echo $(( BUDGET_S - ($(date +%s) - T_START) )); }
# One rank per GPU, as Slurm's --gpus-per-task=1 binds them: rank i sees GPU i (with more ranks
# than GPUs, as in the mixed run, every rank sees all and picks local rank mod GPUs).
cat > "$W/bind.sh" <<'SH'
#!/usr/bin/env bash
[ "${EF_NGPU:-0}" -gt 0 ] && [ "${OMPI_COMM_WORLD_LOCAL_SIZE:-1}" -le "$EF_NGPU" ] && export CUDA_VISIBLE_DEVICES=${OMPI_COMM_WORLD_LOCAL_RANK:-0}
exec "$@"
SH
chmod +x "$W/bind.sh"
# /timing of FILE into $OUT/timing/NAME.h5 (and the fit's JSON sidecar); prints "LB SETUP IO"
# (load balance; the slowest rank's set-up and io seconds), "- - -" without a file.
cat > "$W/timing.py" <<'PY'
import os, shutil, sys
import h5py
name, path, out = sys.argv[1:4]
try:
    with h5py.File(path, "r") as f, h5py.File(os.path.join(out, name + ".h5"), "w") as g:
        f.copy("timing", g)
        t = f["timing"]
        print(f"{float(t.attrs['load_balance']):.3f} {max(t['setup'][()]):.3f} {max(t['io'][()]):.3f}")
except (OSError, KeyError) as e:
    print("- - -")
    print(f"no /timing in {path}: {e}", file=sys.stderr)
if os.path.exists(path + ".timing.json"):
    shutil.copy(path + ".timing.json", os.path.join(out, name + ".h5.timing.json"))
PY
declare -A BASE  # series -> its 1-unit run's seconds
# run NAME SERIES MODE UNITS GPUS CPUS REPLICAS CAP NOTE -- COMMAND...: one timed run, one TSV row.
# MODE strong|weak|mixed|none; UNITS: GPUs or CPU ranks (the 1-unit run is the series' baseline).
run() {
    local name=$1 series=$2 mode=$3 units=$4 g=$5 c=$6 reps=$7 cap=$8 note=$9
    shift 10
    local limit rc=0 t0 secs eff=- lb=- setup=- io=-
    limit=$(( $(left) - 15 ))
    [ "$limit" -gt "$cap" ] && limit=$cap
    if [ "$limit" -lt 5 ]; then
        say "$name: skipped (budget: $(left) s left)"
        printf '%s\t%s\t%s\t%s\tskipped\t-\t-\t-\t-\tnot run: the budget was spent\n' "$name" "$g" "$c" "$reps" | tee -a "$TSV"
        return 1
    fi
    say "$name: $g GPU(s), $c CPU rank(s), $reps (timeout $limit s)"
    t0=$(date +%s.%N)
    timeout -k 5 "$limit" "$@" > "$OUT/logs/$name.log" 2>&1 || rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        note="timeout after $limit s${note:+; $note}" secs="timeout"
    elif [ "$rc" != 0 ]; then
        note="FAILED (exit $rc)${note:+; $note}"
        tail -5 "$OUT/logs/$name.log" | sed 's/^/    /'
    fi
    read -r lb setup io < <(py "$W/timing.py" "$name" "$W/$name.h5" "$OUT/timing" 2>> "$OUT/logs/$name.log")
    if [ "$rc" = 0 ]; then
        [ "$units" = 1 ] && [ -z "${BASE[$series]:-}" ] && BASE[$series]=$secs
        local b=${BASE[$series]:-}
        if [ -n "$b" ]; then
            case "$mode" in
                strong) eff=$(awk -v b="$b" -v t="$secs" -v n="$units" 'BEGIN { printf "%.3f", b / (n * t) }') ;;
                weak | mixed) eff=$(awk -v b="$b" -v t="$secs" 'BEGIN { printf "%.3f", b / t }') ;;
            esac
        fi
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$g" "$c" "$reps" "$secs" "$eff" "$lb" "$setup" "$io" "$note" \
        | tee -a "$TSV"
    return "$rc"
}
# gpu_fit NAME SERIES G REPLICAS CAP NOTE INI OPTIONS...: a fit on G GPU ranks.
gpu_fit() {
    local name=$1 series=$2 g=$3 reps=$4 cap=$5 note=$6 ini=$7
    shift 7
    run "$name" "$series" strong "$g" "$g" 0 "$reps" "$cap" "$note" -- $MPI --bind-to none -np "$g" ./bind.sh \
        ensemblefit fit "$ini" --run.workers "$WORKERS" --fit.replicas "$reps" --output.file "$name.h5" --overwrite "$@"
}
# cpu_fit NAME SERIES MODE N REPLICAS CAP: stats2 on N CPU ranks, one thread each.
cpu_fit() {
    run "$1" "$2" "$3" "$4" 0 "$4" "$5" "$6" "" -- $MPI $CPU_BIND -np "$4" -x CUDA_VISIBLE_DEVICES= \
        ensemblefit fit stats2.ini --run.workers cpu --run.threads 1 --fit.replicas "$5" --output.file "$1.h5" --overwrite
}
# same A B DATASET: "bits equal" or "bits DIFFERENT" (every dataset under DATASET, or it alone).
same() {
    py - "$@" <<'PY' 2>/dev/null || echo "bits not compared"
import sys, h5py, numpy as np
a, b = (h5py.File(f, "r") for f in sys.argv[1:3])
d = sys.argv[3]
keys = [d + "/" + k for k in a[d]] if isinstance(a[d], h5py.Group) else [d]
print("bits equal" if all(np.array_equal(a[k][...], b[k][...]) for k in keys) else "bits DIFFERENT")
PY
}
has() { [[ " $SECTIONS " == *" $1 "* ]]; }
report() {  # report SERIES FILES...: ensemblefit report over the runs' /timing copies
    local s=$1 files=() f
    shift
    for f in "$@"; do [ -f "$OUT/timing/$f.h5" ] && files+=("$OUT/timing/$f.h5"); done
    [ ${#files[@]} -gt 0 ] || return 0
    ensemblefit report "${files[@]}" --csv "$OUT/reports/$s.csv" --overwrite > "$OUT/reports/$s.txt" 2>&1 \
        && say "report $s: $(grep -E '^(gpu|cpu) ranks:' "$OUT/reports/$s.txt" | head -1 | sed 's/; baseline.*//')"
}

# The sections, in order.
sections() {
say "sections: $SECTIONS; budget $BUDGET_S s; work folder $W ($(df -h . | awk 'NR == 2 { print $4 " free" }'))"
[ "$NGPU" -gt 0 ] && nvidia-smi -L
[ "$REHEARSE" = 1 ] && say "REHEARSAL: CPU workers stand in for GPUs; the numbers are not results"

if has stats2; then
    for g in "${GPU_COUNTS[@]}"; do
        gpu_fit "stats2_${R_STATS2}_g$g" stats2 "$g" "$R_STATS2" "$CAP_STATS2" "" stats2.ini
    done
fi
# spot's formula is compiled once per machine (NVRTC and the host compiler, then cached): one
# small untimed fit first, so no series' first run alone pays the compile (1.7-2.6 s).
warm_spot() {
    [ -n "${SPOT_WARM:-}" ] && return 0
    SPOT_WARM=1
    ensemblefit fit spot.ini --run.workers "$WORKERS" --fit.replicas 1000 --fit.solver normal --fit.precision float \
        --output.file warm.h5 --overwrite > "$OUT/logs/spot_warm.log" 2>&1
    rm -f warm.h5
}
if has spot; then
    warm_spot
    dd if=/dev/zero of=dd.bin bs=1M count="$DD_MB" conv=fdatasync 2> dd.log
    disk=$(grep -o '[0-9.,]* [kMG]*B/s' dd.log | tail -1)
    rm -f dd.bin
    printf 'disk_write\t-\t-\t-\t%s\t-\t-\t-\t-\tdd %s MiB conv=fdatasync in %s: %s\n' \
        "$(awk '/copied/ { for (i = 1; i < NF; i++) if ($(i + 1) ~ /^s,?$/) print $i }' dd.log | tr -d ,)" \
        "$DD_MB" "$PWD" "$disk" | tee -a "$TSV"
    for g in "${GPU_COUNTS[@]}"; do
        n="spot_${R_SPOT}_g$g"
        gpu_fit "$n" spot "$g" "$R_SPOT" "$CAP_SPOT" "disk $disk" spot.ini --fit.solver normal --fit.precision float
        [ -f "$n.h5" ] && say "$n: output $(du -m "$n.h5" | cut -f1) MiB (disk $disk)"
        rm -f "$n.h5"
    done
fi
if has mixed; then
    alone="stats2_${R_STATS2}_g$MIX_G"
    [ -f "$alone.h5" ] || gpu_fit "$alone" mixed "$MIX_G" "$R_STATS2" "$CAP_STATS2" "the GPUs alone" stats2.ini
    BASE[mixed]=$(awk -F'\t' -v n="$alone" '$1 == n && $5 ~ /^[0-9.]+$/ { s = $5 } END { print s }' "$TSV")
    m="mixed_${R_STATS2}_g${MIX_G}_c$MIX_C"
    run "$m" mixed mixed - "$MIX_G" "$MIX_C" "$R_STATS2" "$CAP_MIXED" "efficiency = the GPUs alone / this" -- \
        $MPI --bind-to none -np "$MIX_G" ./bind.sh ensemblefit fit stats2.ini --run.workers "$WORKERS" \
        --sched.policy weighted --fit.replicas "$R_STATS2" --output.file "$m.h5" --overwrite \
        : -np "$MIX_C" -x CUDA_VISIBLE_DEVICES= ensemblefit fit stats2.ini --run.workers cpu --run.threads 1 \
        --sched.policy weighted --fit.replicas "$R_STATS2" --output.file "$m.h5" --overwrite
    say "$m against $alone: /replicas $(same "$alone.h5" "$m.h5" /replicas)"
fi
if has ptycho; then
    t0=$(date +%s)
    if [ "$REHEARSE" = 1 ]; then
        ensemblefit simulate ptycho --out bench.h5 --scan 8 --dp 32 --modes 2 --dose 1e6 --jitter 0.15 \
            --scan-pattern raster --threads 2 --overwrite > "$OUT/logs/simulate.log" 2>&1
        write_bench_ini bench.ini "$ITERS"
        sed -i 's/^modes = 12/modes = 2/; s/^workers = gpu/workers = cpu/' bench.ini
    else
        timeout 150 bash -c "$(declare -f simulate_bench); simulate_bench 128" > "$OUT/logs/simulate.log" 2>&1
        write_bench_ini bench.ini "$ITERS"
    fi
    say "ptycho: dataset simulated in $(( $(date +%s) - t0 )) s"
    for g in "${GPU_COUNTS[@]}"; do
        n="ptycho_${ITERS}it_g$g"
        run "$n" ptycho strong "$g" "$g" 0 - "$CAP_PTYCHO" "$ITERS iterations" -- \
            $MPI --bind-to none -np "$g" ./bind.sh ensemblefit reconstruct bench.ini --output.file "$n.h5"
        [ "$g" -gt 1 ] && say "$n against 1 GPU: /object $(same "ptycho_${ITERS}it_g1.h5" "$n.h5" /object)"
    done
fi
# spot1: ensemblefit at 1e7 on 1 GPU beside the minimal peer (perf/peers/spot_minimal.cu, bundled
# as peer_spot_minimal; REHEARSE=1 builds its host-only form here), 3 runs each, alternating, each
# warmed once untimed (the peer by its --check, GPU against host); the medians on one line, and the
# last runs' means compared (spot_compare.py).
if has spot1; then
    warm_spot
    PEER=peer_spot_minimal
    if [ "$REHEARSE" = 1 ]; then  # the host-only form has no --check: a small run warms it
        PEER=$W/peer_spot_minimal
        g++ -O2 -std=c++20 -x c++ "$SRC/perf/peers/spot_minimal.cu" -o "$PEER" || say "spot1: the peer's host build failed"
        rm -f peer_warm.bin
        "$PEER" spot.csv 1000 peer_warm.bin > "$OUT/logs/spot1_peer_warm.log" 2>&1
        rm -f peer_warm.bin
    else  # the warm-up is the peer's self-check: 2,000 replicas on the GPU against the host
        "$PEER" --check spot.csv 2000 > "$OUT/logs/spot1_peer_check.log" 2>&1
        say "spot1: peer --check (exit $?): $(tail -1 "$OUT/logs/spot1_peer_check.log")"
    fi
    ef="spot_${R_SPOT1}_g1" peer="peer_spot_${R_SPOT1}"
    for i in 1 2 3; do
        rm -f "${ef}_$((i - 1)).h5" "${ef}_$((i - 1)).h5.timing.json" "$peer.bin"
        run "${ef}_$i" spot1 none 1 1 0 "$R_SPOT1" "$CAP_STATS2" "ensemblefit, mpirun -np 1" -- $MPI --bind-to none -np 1 \
            ./bind.sh ensemblefit fit spot.ini --run.workers "$WORKERS" --fit.replicas "$R_SPOT1" \
            --output.file "${ef}_$i.h5" --overwrite --fit.solver normal --fit.precision float
        run "${peer}_$i" spot1 none 1 1 0 "$R_SPOT1" "$CAP_STATS2" "minimal peer, no MPI" -- "$PEER" spot.csv "$R_SPOT1" "$peer.bin"
    done
    median() {  # median NAME: "T s (median of N)" over the rows NAME_1..3 that finished
        awk -F'\t' -v p="$1" '$1 ~ "^"p"_[123]$" && $5 ~ /^[0-9.]+$/ && $10 !~ /FAILED/ { print $5 }' "$TSV" | sort -g | awk '{ v[NR] = $1 }
            END { if (NR == 0) print "- (no run finished)"; else printf "%.3f s (median of %d)\n",
                  NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, NR }'
    }
    mb() { [ -f "$1" ] && awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.1f MB", b / 1e6 }' || echo "-"; }
    say "spot1: ensemblefit $(median "$ef"), minimal peer $(median "$peer"); outputs $(mb "${ef}_3.h5") and $(mb "$peer.bin"); $(py "$SRC/perf/peers/spot_compare.py" "${ef}_3.h5" "$OUT/logs/${peer}_3.log")"
    rm -f "${ef}_3.h5" "${ef}_3.h5.timing.json" "$peer.bin"
fi
if has cpuweak; then
    for c in "${CPU_COUNTS[@]}"; do cpu_fit "cpuweak_${R_WEAK}_c$c" cpuweak weak "$c" $((R_WEAK * c)) "$CAP_CPU"; done
fi
if has stats2big; then
    for g in "${GPU_COUNTS[@]}"; do
        gpu_fit "stats2_${R_STATS2_BIG}_g$g" stats2big "$g" "$R_STATS2_BIG" "$CAP_BIG" "" stats2.ini
    done
fi
if has cpustrong; then
    # the baseline, then the largest counts first: what the budget cuts is the middle
    order=(1)
    for ((i = ${#CPU_COUNTS[@]} - 1; i > 0; i--)); do order+=("${CPU_COUNTS[i]}"); done
    [ -n "${STRONG_COUNTS:-}" ] && read -r -a order <<< "$STRONG_COUNTS"
    for c in "${order[@]}"; do cpu_fit "cpustrong_${R_STRONG}_c$c" cpustrong strong "$c" "$R_STRONG" "$CAP_STRONG"; done
fi
}

# `ensemblefit report` per series over the /timing copies (those of earlier calls too).
reports() {
    report stats2 "${GPU_COUNTS[@]/#/stats2_${R_STATS2}_g}"
    report spot "${GPU_COUNTS[@]/#/spot_${R_SPOT}_g}"
    # one CPU rank's throughput: the strong 1-rank run (more replicas per set-up), else the weak one
    local cpu1="cpustrong_${R_STRONG}_c1"
    [ -f "$OUT/timing/$cpu1.h5" ] || cpu1="cpuweak_${R_WEAK}_c1"
    report mixed "stats2_${R_STATS2}_g$MIX_G" "mixed_${R_STATS2}_g${MIX_G}_c$MIX_C" "stats2_${R_STATS2}_g1" "$cpu1"
    report ptycho "${GPU_COUNTS[@]/#/ptycho_${ITERS}it_g}"
    report cpuweak "${CPU_COUNTS[@]/#/cpuweak_${R_WEAK}_c}"
    report stats2big "${GPU_COUNTS[@]/#/stats2_${R_STATS2_BIG}_g}"
    report cpustrong "${CPU_COUNTS[@]/#/cpustrong_${R_STRONG}_c}"
}


cp inputs/stats2.ini inputs/dis-mellin-lo.h5 inputs/spot.ini inputs/spot.csv "$W"/
{
    cd "$W" || exit 1
    sections
    reports
    cd "$SRC" || exit 1
} 2>&1 | tee -a "$OUT/progress.log"
rm -rf "$W"
say "done in $(( $(date +%s) - T_START )) s; runs failed: $(grep -c $'\t''FAILED' "$TSV"), timed out: $(grep -c $'\t''timeout' "$TSV"), skipped: $(grep -c $'\t''skipped' "$TSV"); TSV $TSV"
echo "== issue35.tsv"
cat "$TSV"
