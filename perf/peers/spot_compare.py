#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Whether perf/peers/spot_minimal.cu fitted the same ensemble as ensemblefit.

    spot_compare.py EF.h5 PEER.log     -> one line on stdout; exit 0 agree, 1 not, 2 not compared

EF.h5: `ensemblefit fit inputs/spot.ini ...`'s output (/summary/mean and /summary/std, over its
converged replicas, counted from /replicas/status); PEER.log: the peer's output, whose last line
starting with {"peer" is its JSON (mean and std over its finished replicas). The two draw
different random numbers, so the means are compared as distributions: for each parameter
z = (peer - ensemblefit) / sqrt(std_peer^2 / N_peer + std_ef^2 / N_ef), agreement when every
|z| < 5. The peer stops at a 1e-4 relative chi^2 change where ensemblefit goes on to float's
precision: on the same replicas (2e5, host) that left the peer's s 0.0012 standard deviations
below ensemblefit's on average, which at 1e7 replicas is about 2.7 of the z above; the line also
gives each difference in units of the ensemble's standard deviation, and the peer's phases
(seconds inside its process: init, generate+fit, copy, write, process).
"""
import json
import sys

NAMES = ("a", "u", "v", "s", "c")
PHASES = ("init_s", "generate_fit_s", "copy_s", "write_s", "process_s")


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    ef_path, log_path = sys.argv[1:3]
    try:
        import h5py
        import numpy as np

        with h5py.File(ef_path, "r") as f:
            ef_mean = np.asarray(f["/summary/mean"][()], dtype=float)
            ef_std = np.asarray(f["/summary/std"][()], dtype=float)
            ef_n = int(np.count_nonzero(f["/replicas/status"][()] == 0))
        with open(log_path) as f:
            lines = [line for line in f if line.startswith('{"peer"')]
        if not lines:
            raise ValueError(f"{log_path}: no JSON line of the peer")
        peer = json.loads(lines[-1])
        p_mean = np.asarray(peer["mean"], dtype=float)
        p_std = np.asarray(peer["std"], dtype=float)
        p_n = int(peer["finished"])
        if ef_mean.shape != (len(NAMES),) or p_mean.shape != (len(NAMES),):
            raise ValueError(f"{ef_path}: {ef_mean.shape[0]} parameters, the peer {p_mean.shape[0]}; expected 5")
    except (OSError, KeyError, ValueError, ImportError) as e:
        print(f"means not compared: {e}")
        return 2
    z = (p_mean - ef_mean) / np.sqrt(p_std**2 / p_n + ef_std**2 / ef_n)
    rel = (p_mean - ef_mean) / ef_std
    agree = bool(np.all(np.abs(z) < 5))
    parts = ", ".join(f"{n} {m:.5g} z {zz:+.2f} ({r:+.4f} sd)" for n, m, zz, r in zip(NAMES, p_mean, z, rel))
    phases = ", ".join(f"{k[:-2].replace('_', '+')} {peer[k]:.3f}" for k in PHASES if k in peer)
    print(f"peer means against ensemblefit's ({p_n} and {ef_n} replicas): {parts}; "
          f"max |z| {np.max(np.abs(z)):.2f}: {'agree' if agree else 'DIFFER'} (|z| < 5); "
          f"the peer's seconds inside: {phases}")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
