# SPDX-License-Identifier: MIT
# A cluster of two "nodes" on one machine, for tests/mpi/multinode.sh: each node is a process
# holding its own network, UTS (host name) and mount namespaces, the two joined by a veth pair on
# a private /24 that exists only inside them; Open MPI is started in node a and reaches node b
# over TCP, its rsh agent entering b's namespaces (nsenter) instead of ssh. Nothing is changed
# in the machine's own namespaces: the links and addresses live in the nodes' namespaces and
# vanish with them. Sourced after tests/tools/mpi_common.sh ($WORK, $MPIEXEC, fail, ok).
#
#   cluster_start            exits 77 (ctest: skipped) with one line saying why where it cannot
#   hostfile FILE A B [b-first]  a hostfile: node a with A slots, b with B (0: left out)
#   cluster_run HOSTFILE N ARGS...   mpirun of N ranks over the hosts of HOSTFILE, started in
#                            its first node (rank 0's), with the test network's MCA settings; at
#                            most 300 s (a hang ends inside ctest's limit; a loaded machine finishes)
#   cluster_pids NODE        the processes inside NODE (a or b), one pid a line
#   cluster_exec NODE CMD... a command inside NODE's namespaces
#   cluster_stop             (trap on EXIT) ends every process in the nodes, then removes $WORK
NODE_NET=10.213.7
NODE_ADDR_a=$NODE_NET.1 NODE_ADDR_b=$NODE_NET.2
NODE_HOST_a=ef-node-a NODE_HOST_b=ef-node-b
NODE_PID_a='' NODE_PID_b=''

cluster_skip() { echo "multinode: skipped: $*"; exit 77; }

cluster_start() {
    [ "$(id -u)" = 0 ] || cluster_skip "network namespaces need root (uid $(id -u))"
    local tool
    for tool in unshare nsenter ip; do
        command -v $tool > /dev/null || cluster_skip "$tool not found"
    done
    unshare -n -u -m true 2> /dev/null || cluster_skip "unshare -n -u -m is refused here (no namespaces)"
    trap cluster_stop EXIT
    local n
    for n in a b; do
        # The holder: bounded (sleep 600 > ctest's timeout), so even a SIGKILLed test leaves nothing.
        unshare -n -u -m --propagation private sleep 600 &
        printf -v NODE_PID_$n '%s' $!
    done
    for _ in $(seq 1 50); do  # until both holders are in their namespaces
        [ "$(readlink /proc/$NODE_PID_a/ns/net)" != "$(readlink /proc/self/ns/net)" ] &&
            [ "$(readlink /proc/$NODE_PID_b/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break
        sleep 0.1
    done
    cluster_exec a ip link add ef0 type veth peer name ef0 netns "$NODE_PID_b" ||
        cluster_skip "no veth pair could be made between the namespaces"
    for n in a b; do
        local addr=NODE_ADDR_$n host=NODE_HOST_$n
        cluster_exec $n hostname "${!host}"
        cluster_exec $n sh -c "ip link set lo up && ip addr add ${!addr}/24 dev ef0 && ip link set ef0 up" ||
            fail "node $n: the test network could not be set up"
    done
    # The rsh agent: Open MPI calls it as `AGENT HOST orted ARGS...` (one shell command line).
    cat > "$WORK/enter-node.sh" <<AGENT
#!/bin/bash
case "\$1" in
    $NODE_ADDR_a) pid=$NODE_PID_a ;;
    $NODE_ADDR_b) pid=$NODE_PID_b ;;
    *) echo "enter-node.sh: no test node \$1" >&2; exit 255 ;;
esac
shift
exec nsenter -t \$pid -n -u -m --wd="$WORK" -- /bin/sh -c "\$*"
AGENT
    chmod +x "$WORK/enter-node.sh"
    echo "cluster: $NODE_HOST_a ($NODE_ADDR_a) and $NODE_HOST_b ($NODE_ADDR_b), veth on $NODE_NET.0/24"
}

cluster_exec() {
    local pid=NODE_PID_$1
    shift
    nsenter -t "${!pid}" -n -u -m --wd="$WORK" -- "$@"
}

# hostfile NAME A_SLOTS B_SLOTS [b-first]: node a and/or b with those slots (0: left out); ranks
# are mapped by slot, the first node first, so b-first puts rank 0 on node b.
hostfile() {
    local a="" b=""
    [ "$2" -gt 0 ] && a="$NODE_ADDR_a slots=$2"
    [ "$3" -gt 0 ] && b="$NODE_ADDR_b slots=$3"
    if [ "${4:-}" = b-first ]; then printf '%s\n' "$b" "$a"; else printf '%s\n' "$a" "$b"; fi | sed '/^$/d' > "$1"
}

cluster_run() {
    local hosts=$1 np=$2 head=$NODE_PID_a
    shift 2
    # mpirun starts in the file's first node: Open MPI puts its own node first whatever the order.
    [ "$(head -c ${#NODE_ADDR_b} "$hosts")" = "$NODE_ADDR_b" ] && head=$NODE_PID_b
    timeout 300 nsenter -t "$head" -n -u -m --wd="$WORK" -- "$MPIEXEC" --hostfile "$hosts" -np "$np" \
        --mca plm_rsh_agent "$WORK/enter-node.sh" --mca btl self,vader,tcp \
        --mca btl_tcp_if_include $NODE_NET.0/24 --mca oob_tcp_if_include $NODE_NET.0/24 --bind-to none --mca mpi_yield_when_idle 1 "$@"
    # (slots are declared, so Open MPI does not see the 2-core machine as oversubscribed and would
    # spin in its waits: a 3-iteration reconstruction took 23 s instead of 2.4 s without the yield)
}

cluster_pids() {
    local pid=NODE_PID_$1 ns p
    ns=$(readlink "/proc/${!pid}/ns/net") || return 0
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/ns/net" 2> /dev/null)" = "$ns" ] && echo "${p#/proc/}"
    done
    return 0
}

cluster_stop() {
    local n p
    for n in a b; do
        local pid=NODE_PID_$n
        [ -n "${!pid}" ] || continue
        # Every process in the node's namespaces was started by this test (holder, orted, ranks).
        for p in $(cluster_pids $n); do kill -9 "$p" 2> /dev/null || true; done
    done
    wait 2> /dev/null || true
    rm -rf "$WORK"
}
