#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.stream on CPU workers (the streaming itself is a GPU feature: tests/gpu/test_recon_stream.cpp
# compares a streamed GPU run with a resident one bit for bit): `stream = on` is accepted, said
# once (rank 0 only, on 2 ranks), changes no bit of the result; `off` and the default say
# nothing; a bad value is one error line, exit 2, nothing written.
source "$(dirname "$0")/../tools/mpi_common.sh"

"$EF" simulate ptycho --out sim.h5 --scan 12 --dp 32 --modes 1 --dose 1e7 --seed 4 > sim.log
cat > recon.ini <<'INI'
[data]
file = sim.h5
[solver]
iterations = 4
batch_size = 16
[run]
workers = cpu
[output]
file = base.h5
previews = false
INI
run_np 1 reconstruct recon.ini > base.log || { cat base.log; fail "default run"; }
run_np 1 reconstruct recon.ini --run.stream on --output.file on1.h5 > on1.log || { cat on1.log; fail "stream = on, 1 rank"; }
OMP_NUM_THREADS=1 run_np 2 reconstruct recon.ini --run.stream on --output.file on2.h5 > on2.log ||
    { cat on2.log; fail "stream = on, 2 ranks"; }
run_np 1 reconstruct recon.ini --run.stream off --output.file off1.h5 > off1.log || { cat off1.log; fail "stream = off"; }

note="run.stream = on: ignored by CPU workers"
for log in on1.log on2.log; do
    [ "$(grep -c "$note" $log)" = 1 ] || { cat $log; fail "$log: the CPU note is not printed exactly once"; }
done
for log in base.log off1.log; do
    ! grep -q "stream" $log || { cat $log; fail "$log mentions streaming without run.stream = on"; }
done
/usr/bin/python3 - <<'PY' || fail "the resolved config in on1.h5 lacks stream = on"
import h5py
c = h5py.File("on1.h5", "r").attrs["config"]
c = c.decode() if isinstance(c, bytes) else str(c)
assert "\nstream = on\n" in c, c
PY
ok "run.stream = on on CPU workers: accepted, said once, recorded in the resolved config"
for f in on1.h5 on2.h5 off1.h5; do
    $H5CHECK equal base.h5 $f /object /probe /loss /positions || fail "$f differs from the default run"
done
ok "run.stream = on / off on CPU workers: /object, /probe, /loss, /positions bitwise identical to the default"

expect_error 2 "run.stream: unknown value 'maybe' \(allowed: auto, on, off\)" -- \
    "$EF" reconstruct recon.ini --run.stream maybe --output.file bad.h5
[ ! -e bad.h5 ] || fail "a bad run.stream wrote bad.h5"
