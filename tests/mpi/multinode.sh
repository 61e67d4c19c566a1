#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two nodes on one machine (issue 36): network + UTS + mount namespaces joined by a veth pair,
# Open MPI over TCP between them, its rsh agent entering the other node (tests/tools/netns_cluster.sh).
# On 2 nodes x 2 ranks against 1 node x 4 ranks:
#  - a dis-mellin fit (node-shared tables and Gram set-up) and a reconstruction, bitwise equal
#    (the fit also on 3 + 1 ranks: node b's lone rank builds its own tables);
#  - the placement table names each rank's host and counts the ranks of each node;
#  - the node-shared set-up is made once per node (EF_SETUP_TRACE: one window per node, held by
#    its first rank, mapped by the other);
#  - kill -9 of every rank of node b mid-fit, then --resume on 1 node x 4: bitwise equal;
#  - rank 0's node with a read-only output folder (a bind mount in that node's mount namespace):
#    one error line naming that node, exit 2; the same folder read-only on a node without rank 0
#    is no error (only rank 0 writes).
# Skipped (exit 77) where namespaces cannot be made (not root, no unshare).
source "$(dirname "$0")/../tools/mpi_common.sh"
source "$SRC/tests/tools/netns_cluster.sh"
export HDF5_USE_FILE_LOCKING=FALSE  # the kill test reads the file a live run writes
cluster_start
hostfile two.hosts 2 2
hostfile one.hosts 4 0

# 1. A dis-mellin fit on the Gram path (node-shared tables and set-up), both layouts.
"$EF" simulate dis --out small.h5 --points 201 --seed 7 --noise 0.03 > sim.log
sed -e 's/^file = dis-mellin-lo.h5/file = small.h5/' "$SRC/inputs/stats2.ini" > small.ini
cluster_run one.hosts 4 "$EF" fit small.ini --fit.replicas 4 --output.file one.h5 > one.log 2>&1 ||
    { cat one.log; fail "fit on 1 node x 4 ranks"; }
EF_SETUP_TRACE=1 cluster_run two.hosts 4 "$EF" fit small.ini --fit.replicas 4 --output.file two.h5 > two.log 2>&1 ||
    { cat two.log; fail "fit on 2 nodes x 2 ranks"; }
$H5CHECK equal one.h5 two.h5 /central /replicas /summary || fail "fit: 2 nodes x 2 ranks differ from 1 node x 4"
ok "fit: 2 nodes x 2 ranks bitwise equal to 1 node x 4 ranks"
# Uneven nodes: 3 ranks share node a's windows, node b's lone rank builds its own.
hostfile three-one.hosts 3 1
EF_SETUP_TRACE=1 cluster_run three-one.hosts 4 "$EF" fit small.ini --fit.replicas 4 --output.file uneven.h5 > uneven.log 2>&1 ||
    { cat uneven.log; fail "fit on 3 + 1 ranks"; }
$H5CHECK equal one.h5 uneven.h5 /central /replicas /summary || fail "fit: 3 + 1 ranks on 2 nodes differ from 1 node x 4"
grep -q "^  ranks per node (2 nodes): $NODE_HOST_a 3 (ranks 0-2), $NODE_HOST_b 1 (rank 3)$" uneven.log ||
    { cat uneven.log; fail "3 + 1: the ranks per node"; }
grep -q "tables [0-9.]* MB, one copy per node shared by its 3 ranks, each built 1/3 of the rows (rank 0's node; the nodes have 1 to 3 ranks, a node of one builds its own)" uneven.log ||
    { cat uneven.log; fail "3 + 1: the model line speaks for node b too"; }
grep -q "^\[share rank 3\]" uneven.log && { grep '^\[share' uneven.log; fail "node b's lone rank claims a node window"; }
w3=$(grep -c "^\[share rank 0\] node window [0-9.]* MB on $NODE_HOST_a: local rank 0 of 3, holds the memory" uneven.log || true)
[ "$w3" -ge 2 ] && [ "$(grep -c "^\[share rank [12]\] node window [0-9.]* MB on $NODE_HOST_a: local rank [12] of 3, maps" uneven.log)" = \
    "$((2 * w3))" ] || { grep '^\[share' uneven.log; fail "3 + 1: node a's windows"; }
ok "fit: 3 + 1 ranks on 2 nodes (node b's lone rank without a window) bitwise equal to 1 node x 4"

# 2. Placement: each rank's host, and the ranks of each node counted.
for r in 0 1; do grep -Eq "^  $r +$NODE_HOST_a " two.log || { cat two.log; fail "rank $r is not shown on $NODE_HOST_a"; }; done
for r in 2 3; do grep -Eq "^  $r +$NODE_HOST_b " two.log || { cat two.log; fail "rank $r is not shown on $NODE_HOST_b"; }; done
grep -q "^  ranks per node (2 nodes): $NODE_HOST_a 2 (ranks 0-1), $NODE_HOST_b 2 (ranks 2-3)$" two.log ||
    { cat two.log; fail "the placement does not count the ranks per node"; }
grep -q "ranks per node" one.log && { cat one.log; fail "one node: a ranks-per-node line"; }
grep -q "share cores" two.log && { cat two.log; fail "ranks of different nodes warned as sharing cores"; }
ok "placement: ranks 0-1 on $NODE_HOST_a, 2-3 on $NODE_HOST_b, 2 per node counted"

# 3. The node-shared set-up once per node: per window, one holder and one mapper on each node.
grep -q "tables [0-9.]* MB, one copy per node shared by its 2 ranks, each built 1/2 of the rows$" two.log ||
    { cat two.log; fail "the tables are not shared per node (or the line qualifies nodes that are alike)"; }
windows=$(grep -c "^\[share rank 0\] node window" two.log || true)
[ "$windows" -ge 2 ] || { cat two.log; fail "EF_SETUP_TRACE shows $windows windows on rank 0, wanted the tables' and the Gram set-up's"; }
for node in "0 $NODE_HOST_a 0 holds the memory" "1 $NODE_HOST_a 1 maps" "2 $NODE_HOST_b 0 holds the memory" "3 $NODE_HOST_b 1 maps"; do
    read -r rank host local what <<< "$node"
    n=$(grep -c "^\[share rank $rank\] node window [0-9.]* MB on $host: local rank $local of 2, $what" two.log || true)
    [ "$n" = "$windows" ] || { grep '^\[share' two.log; fail "rank $rank: $n of $windows windows as local rank $local on $host"; }
done
ok "set-up: each of $windows node windows made once on $NODE_HOST_a and once on $NODE_HOST_b (2 ranks each)"

# 4. A reconstruction, both layouts.
"$EF" simulate ptycho --out ptycho.h5 --scan 8 --dp 32 --modes 2 --dose 1e6 --seed 3 > psim.log
cat > recon.ini <<'INI'
[data]
file = ptycho.h5
[model]
modes = 2
[solver]
iterations = 3
batch_size = 16
seed = 5
[positions]
correct = true
start = 1
[output]
file = r1.h5
previews = false
INI
cluster_run one.hosts 4 "$EF" reconstruct recon.ini > r1.log 2>&1 || { cat r1.log; fail "reconstruction on 1 node x 4"; }
cluster_run two.hosts 4 "$EF" reconstruct recon.ini --output.file r2.h5 > r2.log 2>&1 ||
    { cat r2.log; fail "reconstruction on 2 nodes x 2"; }
$H5CHECK equal r1.h5 r2.h5 /object /probe /positions /loss || fail "reconstruction: 2 nodes x 2 ranks differ from 1 node x 4"
grep -q "ranks per node (2 nodes)" r2.log || { cat r2.log; fail "the reconstruction's placement does not count the nodes"; }
ok "reconstruction: 2 nodes x 2 ranks bitwise equal to 1 node x 4 ranks"

# 5. Every rank of node b killed (-9) mid-fit, then --resume on 1 node x 4.
write_peaks_problem 1000 60 1 full.h5
cluster_run one.hosts 4 "$EF" fit peaks.ini > full.log 2>&1 || { cat full.log; fail "peaks fit on 1 node x 4"; }
cluster_run two.hosts 4 "$EF" fit peaks.ini --output.file killed.h5 --debug.slowdown 0:100,1:100,2:100,3:100 \
    > killed.log 2>&1 &
run=$!
for _ in $(seq 1 1200); do  # until 10 replicas are on disk (bounded: 2 min and more under load)
    sleep 0.1
    [ -e killed.h5 ] || continue
    read -r finished _ < <($H5CHECK status killed.h5 2> /dev/null || echo "0 0")
    [ "${finished:-0}" -ge 10 ] && break
done
victims=$(for p in $(cluster_pids b); do [ "$(cat /proc/$p/comm 2> /dev/null)" = ensemblefit ] && echo "$p"; done || true)
[ "$(echo $victims | wc -w)" = 2 ] || fail "node b runs $(echo $victims | wc -w) ranks, wanted 2"
kill -9 $victims
if wait $run; then fail "the run ended well after node b's ranks were killed"; fi
read -r finished left < <($H5CHECK status killed.h5)
echo "after kill -9 of node b's ranks: $finished done, $left left"
[ "$left" -gt 0 ] || fail "the run finished before node b was killed; the resume test proves nothing"
cluster_run one.hosts 4 "$EF" fit peaks.ini --output.file killed.h5 --resume > resumed.log 2>&1 ||
    { cat resumed.log; fail "--resume on 1 node x 4"; }
grep -q "resume: $left of 61 replica fits left" resumed.log || { cat resumed.log; fail "resume did not report $left left"; }
$H5CHECK equal full.h5 killed.h5 /central /replicas /summary || fail "resumed file differs from the uninterrupted run"
ok "kill -9 of node b's ranks at $finished/61, --resume on 1 node x 4: bitwise equal"

# 6. An output folder that is read-only on one node (a bind mount in its own mount namespace).
write_line_problem
mkdir ro
if ! cluster_exec b sh -c "mount --bind '$WORK/ro' '$WORK/ro' && mount -o remount,bind,ro '$WORK/ro'"; then
    echo "note: no read-only bind mount in node b's mount namespace here; the read-only folder case is not run"
    echo "multinode: all other checks passed"
    exit 0
fi
hostfile b-first.hosts 2 2 b-first
expect_error 2 "^ensemblefit: error: rank 0 \($NODE_HOST_b\): --output.file: cannot write 'ro/out.h5' \(Read-only file system\)" \
    -- cluster_run b-first.hosts 4 "$EF" fit good.ini --output.file ro/out.h5
[ -z "$(ls -A ro)" ] || fail "a refused run left files in ro/: $(ls -A ro)"
cluster_run two.hosts 4 "$EF" fit good.ini --output.file ro/out.h5 > rw.log 2>&1 ||
    { cat rw.log; fail "rank 0 on $NODE_HOST_a (folder writable there) refused"; }
[ "$($H5CHECK status ro/out.h5)" = "6 0" ] || fail "ro/out.h5 (written from $NODE_HOST_a) incomplete"
ok "read-only output folder on $NODE_HOST_b: named when rank 0 is there; no matter when it is not"

echo "multinode: all checks passed"
