#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The output phase against the disk (issue #35): measures the write bandwidth of the disk that
# holds the output folder (dd, one writer and NP writers side by side, each through the page cache
# and with fdatasync, i.e. to the device), then runs one spot ensemble (inputs/spot.ini, gaussian2d,
# solver normal, float) on NP ranks and shows, from its /timing: the replicas and compute per rank
# (load balance), the bytes of /replicas, the writer thread's seconds and throughput, rank 0's io
# phase (what the run waited for the output: the writer's backlog at the end, the summary, the
# timing), each against the time the disk needs for those bytes.
#
# usage: perf/output/disk_vs_output.sh [REPLICAS (default 1000000)] [NP (default 1)]
#   EF=bin (default build/ensemblefit); WORKERS=cpu|gpu (default auto); OUT=dir (default: a temporary
#   folder in $TMPDIR, i.e. the disk measured); EXTRA="..." more fit arguments (on a CPU,
#   --fit.max_iterations 1 makes the run output-bound); DD_MB=size of each dd write (default: the
#   output's size, at least 256, at most 8192).
# On the 4-GPU node: WORKERS=gpu perf/output/disk_vs_output.sh 100000000 4
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
R=${1:-1000000}
NP=${2:-1}
case "$R$NP" in ''|*[!0-9]*) echo "usage: $0 [REPLICAS] [NP]" >&2; exit 2 ;; esac
EF=${EF:-$root/build/ensemblefit}
[ -x "$EF" ] || { echo "no $EF (build first)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/ef-disk.XXXXXX")}
mkdir -p "$OUT" "$root/perf/output/results"
cp "$root/inputs/spot.ini" "$root/inputs/spot.csv" "$OUT/"
P=5
bytes=$(( (R + 1) * (P + 4) * 8 ))  # /replicas index, params, chi2, status, iterations (8 bytes each)
mb=${DD_MB:-$(( bytes / 1048576 ))}
[ "$mb" -lt 256 ] && mb=256
[ "$mb" -gt 8192 ] && mb=8192

# dd_rate N SYNC: MB/s of N writers of $mb MiB each side by side (SYNC=1: each ends with fdatasync).
dd_rate() {
    local n=$1 sync=$2 t0 t1 k
    sync
    t0=$(date +%s.%N)
    for k in $(seq 1 "$n"); do
        if [ "$sync" = 1 ]; then dd if=/dev/zero of="$OUT/dd.$k" bs=1M count="$mb" conv=fdatasync status=none &
        else dd if=/dev/zero of="$OUT/dd.$k" bs=1M count="$mb" status=none & fi
    done
    wait
    t1=$(date +%s.%N)
    rm -f "$OUT"/dd.*
    echo "$n $mb $t0 $t1" | awk '{printf "%.0f", $1 * $2 / ($4 - $3)}'
}
cache1=$(dd_rate 1 0); disk1=$(dd_rate 1 1); cacheN=$(dd_rate "$NP" 0); diskN=$(dd_rate "$NP" 1)
echo "disk of $OUT ($(df -h "$OUT" | awk 'NR==2 {print $1}')): ${mb} MiB per writer"
echo "  1 writer:  ${cache1} MB/s into the page cache, ${disk1} MB/s with fdatasync"
echo "  $NP writer(s): ${cacheN} MB/s into the page cache, ${diskN} MB/s with fdatasync (all together)"

args=(fit spot.ini --fit.replicas "$R" --model.name gaussian2d --fit.solver normal --fit.precision float
      --overwrite --progress-interval 1000 --output.file out.h5)
[ -n "${WORKERS:-}" ] && args+=(--workers "$WORKERS")
# shellcheck disable=SC2206  # EXTRA is split into words on purpose
[ -n "${EXTRA:-}" ] && args+=($EXTRA)
sync
(cd "$OUT" && EF_SETUP_TRACE=1 /usr/bin/time -f '%e' -o run.time mpirun --oversubscribe -np "$NP" "$EF" "${args[@]}" \
    > run.log 2>&1) || { tail -20 "$OUT/run.log" >&2; exit 1; }
model=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
day=$(date +%F)
tsv=$root/perf/output/results/disk-vs-output-$(echo "${gpu:-$model}" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | sed 's/-$//')-$day.tsv
/usr/bin/python3 - "$OUT" "$bytes" "$cache1" "$disk1" "$cacheN" "$diskN" "$NP" "$R" "$tsv" "${gpu:-$model}" \
    "${EXTRA:+EXTRA=\"$EXTRA\" }${WORKERS:+WORKERS=$WORKERS }$0 $*" <<'PY'
import os, sys, h5py
out, nbytes, c1, d1, cN, dN, NP, R, tsv, device, cmd = sys.argv[1:]
nbytes, c1, d1, cN, dN = int(nbytes), float(c1), float(d1), float(cN), float(dN)
wall = float(open(f"{out}/run.time").read().split()[0])
with h5py.File(f"{out}/out.h5", "r") as f:
    t = f["/timing"]; a = t.attrs
    reps = [int(x) for x in t["replicas"][()]]
    comp = [float(x) for x in t["compute"][()]]
    io0, lb = float(t["io"][0]), float(a["load_balance"]) if "load_balance" in a else float(t["load_balance"][()])
    ws, ww = float(a["writer_seconds"]), float(a["writer_wait_seconds"])
mb = nbytes / 1e6
print(f"run: {R} replicas on {NP} rank(s), {wall:.2f} s whole command, file {os.path.getsize(f'{out}/out.h5') / 1e6:.0f} MB")
print(f"  replicas per rank {reps}; compute s {[round(c, 2) for c in comp]}; load balance {lb:.3f}")
print(f"  /replicas {mb:.0f} MB: writer thread {ws:.2f} s ({mb / ws if ws > 0 else 0:.0f} MB/s) beside the fit; "
      f"the run waited for it {ww:.2f} s; rank 0 io phase {io0:.2f} s")
print(f"  the disk for those bytes: {mb / c1:.2f} s into the page cache, {mb / d1:.2f} s to the device (1 writer); "
      f"{mb / cN:.2f} s / {mb / dN:.2f} s with {NP} writers")
new = not os.path.exists(tsv)
with open(tsv, "a") as o:
    if new:
        o.write("device\treplicas\tranks\twall_s\tload_balance\treplicas_per_rank\toutput_MB\twriter_s\twriter_MBps\t"
                "writer_wait_s\trank0_io_s\tcache_MBps_1\tdisk_MBps_1\tcache_MBps_N\tdisk_MBps_N\tcommand\n")
    o.write(f"{device}\t{R}\t{NP}\t{wall:.3f}\t{lb:.4f}\t{'/'.join(map(str, reps))}\t{mb:.1f}\t{ws:.3f}\t"
            f"{mb / ws if ws > 0 else 0:.0f}\t{ww:.3f}\t{io0:.3f}\t{c1:.0f}\t{d1:.0f}\t{cN:.0f}\t{dN:.0f}\t{cmd.strip()}\n")
print(f"raw: {tsv}")
PY
