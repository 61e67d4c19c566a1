#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# slurm-local.sh -- a real single-node Slurm cluster on this machine (Debian 12, root, with or
# without systemd), for tests/slurm/run_tests.sh and for trying the jobs/ scripts by hand.
#
#   bash tests/slurm/slurm-local.sh up       # install, configure, start munged/slurmctld/slurmd
#   bash tests/slurm/slurm-local.sh status
#   bash tests/slurm/slurm-local.sh down     # stop the daemons this script started (by PID)
#
# `up` reuses whatever is already running: a controller that answers is used as it is (its
# slurm.conf is never rewritten while any Slurm daemon runs), and only missing daemons are
# started. With SLURM_LOCAL_STARTED=FILE, `up` appends the name of each daemon it starts to
# FILE and `down` stops only the daemons named there, so a test stops what it started and
# leaves alone a cluster that was up before it.
#
# Knobs: SLURM_LOCAL_CPUS (CPUs of the node; default max(nproc, 4): Slurm may hand out more
# CPUs than there are cores, SlurmdParameters=config_overrides), SLURM_LOCAL_MEM_MB (default 80%
# of MemTotal), SLURM_LOCAL_NODENAME (default hostname -s), SLURM_LOCAL_TASK_PLUGIN (default
# task/none: Slurm binds no task, every task holds all the CPUs; task/affinity makes srun's
# --cpu-bind work, and then SLURM_LOCAL_CPUS must not exceed the real CPUs).
#
# Debian's policy-rc.d keeps the packages' postinst from starting services, so the daemons are
# started here in the foreground (-D) under setsid, which makes $! their own PID. Without
# DependencyParameters=kill_invalid_depend a job whose afterok can never be met stays PENDING
# (DependencyNeverSatisfied) forever.
set -euo pipefail

CONF=/etc/slurm/slurm.conf
MARKER="# single-node test cluster written by"   # this script's, or an earlier setup script's
STATE=/run/slurm-local                         # PID files of the daemons started here
LOGDIR=/var/log/slurm
NODE=${SLURM_LOCAL_NODENAME:-$(hostname -s)}
NPROC=$(nproc)
CPUS=${SLURM_LOCAL_CPUS:-$((NPROC > 4 ? NPROC : 4))}
GPUS=${SLURM_LOCAL_GPUS:-2}
TASK_PLUGIN=${SLURM_LOCAL_TASK_PLUGIN:-task/none}
MEM=${SLURM_LOCAL_MEM_MB:-$(awk '/MemTotal/ {printf "%d", $2/1024*0.8}' /proc/meminfo)}
STARTED=${SLURM_LOCAL_STARTED:-}

log() { printf '[slurm-local %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
started() { [ -z "$STARTED" ] || echo "$1" >> "$STARTED"; }

# alive PIDFILE NAME: the PID in PIDFILE runs a command whose first word ends in NAME
alive() {
    local pid exe
    [ -s "$1" ] || return 1
    pid=$(cat "$1")
    [ -r "/proc/$pid/cmdline" ] || return 1
    exe=$(tr '\0' '\n' < "/proc/$pid/cmdline" | head -n 1)
    [ "${exe##*/}" = "$2" ] && running "$pid"
}
running() {  # running PID: exists and is not a zombie
    [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}
node_responding() {  # the node answers (a '*' after the state means it does not)
    sinfo -h -n "$NODE" -o '%T' 2>/dev/null | grep -Eq '^(idle|mixed|allocated|completing)$'
}
controller_up() { timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP'; }

install_pkgs() {
    local pkgs=(slurm-wlm slurmctld slurmd slurm-client munge openmpi-bin libopenmpi-dev) missing=() p
    for p in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
}

start_munge() {
    if [ ! -s /etc/munge/munge.key ]; then
        log "creating munge key"
        install -d -o munge -g munge -m 0700 /etc/munge
        runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key
    fi
    install -d -o munge -g munge -m 0755 /run/munge   # systemd's RuntimeDirectory=munge
    if alive /run/munge/munged.pid munged; then
        log "munged already running (pid $(cat /run/munge/munged.pid))"
    else
        log "starting munged"
        runuser -u munge -- /usr/sbin/munged               # forks; writes /run/munge/munged.pid
        cp /run/munge/munged.pid "$STATE/munged.pid"
        started munged
    fi
    munge -n | unmunge > /dev/null || die "munge round-trip failed"
}

write_conf() {
    mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd "$LOGDIR"
    if [ -e "$CONF" ] && ! grep -q "^$MARKER" "$CONF"; then
        die "$CONF exists and was not written by this script; not touching a real cluster's config"
    fi
    local new
    new=$(cat <<EOF
$MARKER tests/slurm/slurm-local.sh
ClusterName=local
SlurmctldHost=${NODE}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=${TASK_PLUGIN}
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
DependencyParameters=kill_invalid_depend
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=3600
MailProg=/bin/true
GresTypes=gpu
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=${LOGDIR}/slurmctld.log
SlurmdLogFile=${LOGDIR}/slurmd.log
NodeName=${NODE} NodeAddr=127.0.0.1 CPUs=${CPUS} Sockets=1 CoresPerSocket=${CPUS} ThreadsPerCore=1 RealMemory=${MEM} Gres=gpu:${GPUS} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
)
    if [ "$(cat "$CONF" 2>/dev/null)" != "$new" ]; then
        log "writing $CONF (node $NODE, $CPUS CPUs)"
        printf '%s\n' "$new" > "$CONF"
    fi
    # Pretend GPUs: Slurm schedules and binds them (CUDA_VISIBLE_DEVICES), so the GPU job
    # scripts' allocation and binding can be tested on a machine without a GPU. The gpu plugin
    # wants one device file per GPU; copies of /dev/null (char 1:3) stand in for /dev/nvidiaN.
    local i gres="NodeName=${NODE} Name=gpu File=$STATE/fake-gpu[0-$((GPUS - 1))]"
    for ((i = 0; i < GPUS; i++)); do
        [ -c "$STATE/fake-gpu$i" ] || { rm -f "$STATE/fake-gpu$i"; mknod -m 0666 "$STATE/fake-gpu$i" c 1 3; }
    done
    [ "$(cat /etc/slurm/gres.conf 2>/dev/null)" = "$gres" ] || printf '%s\n' "$gres" > /etc/slurm/gres.conf
}

start_daemon() {  # start_daemon NAME ARGS...: in the foreground of a new session, PID recorded
    local name=$1; shift
    if alive "$STATE/$name.pid" "$name"; then
        log "$name already running (pid $(cat "$STATE/$name.pid"))"
        return 0
    fi
    log "starting $name"
    setsid "/usr/sbin/$name" "$@" > "$LOGDIR/$name.stdout" 2>&1 < /dev/null &
    echo $! > "$STATE/$name.pid"
    started "$name"
}

wait_node() {
    local _ st=
    for _ in $(seq 1 120); do
        st=$(sinfo -h -n "$NODE" -o '%T' 2>/dev/null || true)
        case "$st" in
            idle* | mixed* | allocated* | completing*) log "node $NODE is $st"; return 0 ;;
            down* | drain* | fail*) scontrol update NodeName="$NODE" State=RESUME 2>/dev/null || true ;;
        esac
        sleep 0.5
    done
    tail -n 20 "$LOGDIR/slurmctld.log" "$LOGDIR/slurmd.log" >&2 || true
    die "node $NODE not ready (state: '${st:-?}')"
}

up() {
    [ "$(id -u)" = 0 ] || die "run as root"
    mkdir -p "$STATE" "$LOGDIR"
    install_pkgs
    start_munge
    if controller_up; then
        log "a Slurm controller is already up: using it as it is"
    else
        # Rewrite the config only while no Slurm daemon runs: never change a live cluster.
        if ! alive "$STATE/slurmctld.pid" slurmctld && ! alive "$STATE/slurmd.pid" slurmd; then
            write_conf
        fi
        # -c: start with the job state cleared (jobs of an earlier, stopped cluster are gone)
        start_daemon slurmctld -D -c
    fi
    if ! alive "$STATE/slurmd.pid" slurmd && ! node_responding; then
        start_daemon slurmd -D -N "$NODE"
    fi
    wait_node
}

stop_pid() {  # stop_pid NAME: SIGTERM the PID recorded for NAME, wait for it to exit
    local name=$1 f="$STATE/$1.pid" pid _
    if alive "$f" "$name"; then
        pid=$(cat "$f")
        log "stopping $name (pid $pid)"
        kill -TERM "$pid"
        for _ in $(seq 1 100); do running "$pid" || break; sleep 0.1; done
        if running "$pid"; then
            log "$name (pid $pid) still alive after 10 s, sending SIGKILL"
            kill -KILL "$pid" 2> /dev/null || true
        fi
    fi
    rm -f "$f"
}

down() {
    local name
    for name in slurmd slurmctld munged; do   # the node daemon first, munge last
        if [ -n "$STARTED" ]; then
            if [ ! -s "$STARTED" ] || ! grep -qx "$name" "$STARTED"; then continue; fi
        fi
        stop_pid "$name"
    done
    [ -z "$STARTED" ] || rm -f "$STARTED"
}

status() {
    local n
    for n in munged slurmctld slurmd; do
        if alive "$STATE/$n.pid" "$n"; then echo "$n running (pid $(cat "$STATE/$n.pid"))"
        else echo "$n not started by this script"; fi
    done
    sinfo 2> /dev/null || true
}

case "${1:-}" in
    up) up ;;
    down | stop) down ;;
    status) status ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
