#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `fit --dry-run` names the bounds on rank 0 (issue 36; src/sched/dispatch_bound.*): one line
# for the dispatcher (units/s needed against measured) and one for the writer (rows, bytes),
# computing and writing nothing: the folder is the same before and after, an existing output
# is byte for byte unchanged. With --ranks N the lines are for N ranks: a million ranks of
# one-replica units saturate both (whatever this machine's speed: every unit is 20 ms or
# longer and the fit time comes from a real run's /timing via --baseline), two ranks keep the
# dispatcher far from it. --ranks without --dry-run, or not a whole number, is a usage error.
source "$(dirname "$0")/../tools/mpi_common.sh"
write_line_problem
run_np 2 fit good.ini --output.file base.h5 > base.log
cp base.h5 out.h5
before=$(ls -A | sort; sha256sum out.h5 base.h5)

run_np 2 fit good.ini --dry-run --overwrite > dry.log
grep -q "^dry run: every check passed" dry.log || { cat dry.log; fail "no dry-run line"; }
[ "$(grep -c '^bound: ' dry.log)" = 2 ] || { cat dry.log; fail "wanted two bound lines"; }
grep -q "^bound: dispatcher: 2 ranks need at most .* units/s .*: at most [0-9.]* % busy, keeps up" dry.log ||
    { cat dry.log; fail "2 ranks: the dispatcher line does not say it keeps up"; }
grep -q "^bound: writer: 6 rows of 48 bytes .* keeps up while a replica fit takes at least .* (fit time unknown" dry.log ||
    { cat dry.log; fail "the writer line does not give the threshold without a fit time"; }
grep -q "SATURATED" dry.log && { cat dry.log; fail "2 ranks named saturated"; }
ok "2 ranks: the dispatcher keeps up; the writer's 6 rows of 48 bytes and its threshold"

run_np 2 fit good.ini --dry-run --overwrite --ranks 1000000 --fit.replicas 100000000 --fit.chunk 1 \
    --baseline base.h5 --output.in_place off > big.log
grep -q "^bound: dispatcher: 1000000 ranks need .* units/s (units of [0-9.e+]* replicas, 20[.0-9]* ms each); .* SATURATED: ranks wait for units; [0-9]* ranks keep it busy" big.log ||
    { cat big.log; fail "1e6 ranks: the dispatcher line does not name the saturation"; }
grep -q "^bound: writer: 100000001 rows of 48 bytes = 4.8 GB .* rows/s .* from base.h5.*SATURATED: results wait" big.log ||
    { cat big.log; fail "1e6 ranks: the writer line does not name the saturation"; }
ok "--ranks 1000000: dispatcher and writer saturated, the fit time from --baseline"
# Rows written in place (auto, the default, at 1e8 rows on 2 ranks): rank 0's writer writes a
# row's index and status only.
run_np 2 fit good.ini --dry-run --overwrite --ranks 1000000 --fit.replicas 100000000 --fit.chunk 1 \
    --baseline base.h5 > big_in_place.log
grep -q "^bound: writer: 100000001 rows of 16 bytes = 1.6 GB" big_in_place.log ||
    { cat big_in_place.log; fail "in place: the writer line does not count index and status alone"; }
ok "--ranks 1000000, rows in place: rank 0's writer line counts 16 bytes a row"

after=$(ls -A | sort; sha256sum out.h5 base.h5)
[ "$before" = "$(echo "$after" | grep -v -e '^dry.log$' -e '^big.log$' -e '^big_in_place.log$')" ] ||
    { diff <(echo "$before") <(echo "$after"); fail "a dry run changed the folder"; }
ok "dry runs wrote nothing: the folder and out.h5 unchanged"

expect_error 2 "fit: --ranks belongs to --dry-run" -- run_np 2 fit good.ini --ranks 8
expect_error 2 "--ranks: expected a whole number of ranks in 1..10000000, got '0.5'" -- "$EF" fit good.ini --dry-run --ranks 0.5

# perf/dispatch.sh's knob: --debug.unit-sleep keeps every unit at fit.chunk replicas (no speed is
# reported, so the WorkQueue never grows them) and changes no result.
run_np 2 fit good.ini --fit.replicas 40 --fit.chunk 1 --output.file plain.h5 > plain.log
run_np 2 fit good.ini --fit.replicas 40 --fit.chunk 1 --output.file slept.h5 --debug.unit-sleep 0.002 > slept.log
$H5CHECK equal plain.h5 slept.h5 /central /replicas /summary || fail "--debug.unit-sleep changed the results"
units=$(/usr/bin/python3 -c "import json; print(sum(r['units'] for r in json.load(open('slept.h5.timing.json'))['per_rank']))")
[ "$units" = 41 ] || fail "--debug.unit-sleep: $units units for 41 replica fits, wanted one each"
ok "--debug.unit-sleep 0.002: 41 units of one replica, the same /central, /replicas, /summary"

# Results too large to travel eagerly (250 rows, 12 kB), from ranks asleep in their next unit, with
# Open MPI's shared memory unable to copy between processes by itself (single copy off, as on a
# container without CMA): rank 0's dispatcher receives them without waiting (MPI_Imrecv) and
# completes them at a later poll (results_received_later counts those). The results are the
# same bits as one rank's.
run_np 1 fit good.ini --fit.replicas 3000 --output.file one.h5 > one.log
OMPI_MCA_btl_vader_single_copy_mechanism=none run_np 4 fit good.ini --fit.replicas 3000 --fit.chunk 250 \
    --debug.unit-sleep 0.01 --output.file later.h5 > later.log
$H5CHECK equal one.h5 later.h5 /central /replicas /summary || fail "results received later changed the results"
later=$(/usr/bin/python3 -c "import json; print(json.load(open('later.h5.timing.json'))['dispatcher']['results_received_later'])")
[ "$later" -gt 0 ] || fail "no result of 12 kB was received later: the non-blocking receive went untried"
ok "12 kB results from sleeping ranks: $later of 12 received later, the same /central, /replicas, /summary as 1 rank"
