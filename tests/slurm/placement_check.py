#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The placement a run stored under /timing (attribute `placement`, one tab-separated row per
rank: rank, host, worker, threads, cores, binding, gpu), for the Slurm tests.

  placement_check.py distinct RANKS FILE.h5...   exit 0 if each file has RANKS rows and no two
                                                  ranks of one host share a core
  placement_check.py cores FILE.h5               print each rank's cores, one line per rank

Prints one line per file: its ranks' host:cores, and what is wrong.
"""
import sys

import h5py


def cpus(text):
    out = set()
    for item in text.split(","):
        a, _, b = item.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def rows(path):
    with h5py.File(path, "r") as h:
        raw = h["/timing"].attrs["placement"]
    return [(r.decode() if isinstance(r, bytes) else r).split("\t") for r in raw]


def distinct(ranks, paths):
    bad = 0
    for p in paths:
        try:
            rs = rows(p)
        except (OSError, KeyError) as e:
            print(f"{p}: no stored placement ({e})")
            bad += 1
            continue
        problems = [] if len(rs) == ranks else [f"{len(rs)} rank(s), expected {ranks}"]
        for i, a in enumerate(rs):
            for b in rs[i + 1:]:
                common = cpus(a[4]) & cpus(b[4]) if a[1] == b[1] else set()
                if common:
                    problems.append(f"ranks {a[0]} and {b[0]} share cores {sorted(common)}")
        print(f"{p}: " + ", ".join(f"rank {r[0]} {r[1]}:{r[4]} ({r[5]})" for r in rs) +
              ("; " + "; ".join(problems) if problems else ""))
        bad += bool(problems)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "distinct":
        sys.exit(distinct(int(sys.argv[2]), sys.argv[3:]))
    if len(sys.argv) == 3 and sys.argv[1] == "cores":
        for r in rows(sys.argv[2]):
            print(r[4])
        sys.exit(0)
    print(__doc__, file=sys.stderr)
    sys.exit(2)
