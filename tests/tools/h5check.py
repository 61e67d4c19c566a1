#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Small HDF5 checks for the shell-driven MPI tests (Debian's python3-h5py, /usr/bin/python3).

  h5check.py equal A.h5 B.h5 DATASET...   exit 0 if every dataset is bitwise identical
  h5check.py equal-attrs A.h5 B.h5 NAME... the same, attributes of the objects (and of a group's
                                          datasets) included, and a group's datasets the same set
  h5check.py status FILE.h5               print 'done notdone' over /replicas/status (+ central)
  h5check.py get FILE.h5 DATASET [ATTR]   print a dataset or attribute
"""
import sys

import h5py
import numpy as np


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint8) if a.dtype.kind in "fiu" else a


def same_bits(x, y):
    return np.shape(x) == np.shape(y) and np.array_equal(bits(np.asarray(x)), bits(np.asarray(y)))


def attr_differences(a, b, name):
    x, y = dict(a.attrs), dict(b.attrs)
    if sorted(x) != sorted(y):
        return [f"{name}: attributes {sorted(x)} in A, {sorted(y)} in B"]
    return [f"{name}@{k}: differs" for k in x if not same_bits(x[k], y[k])]


def equal(fa, fb, names, attrs=False):
    """Every dataset named (or in a group named) bitwise equal; with attrs, their attributes and
    the group's too, and a group's datasets the same set."""
    bad = []
    with h5py.File(fa, "r") as a, h5py.File(fb, "r") as b:
        for n in names:
            if n not in a or n not in b:
                bad.append(f"{n}: missing in {'A' if n not in a else 'B'}")
                continue
            objs = [n] if isinstance(a[n], h5py.Dataset) else [f"{n}/{k}" for k in a[n].keys()]
            if attrs and isinstance(a[n], h5py.Group):
                bad += attr_differences(a[n], b[n], n)
                if sorted(a[n].keys()) != sorted(b[n].keys()):
                    bad.append(f"{n}: holds {sorted(a[n].keys())} in A, {sorted(b[n].keys())} in B")
                    continue
            for o in objs:
                if not same_bits(a[o][()], b[o][()]):
                    bad.append(f"{o}: differs")
                if attrs:
                    bad += attr_differences(a[o], b[o], o)
    for m in bad:
        print(m)
    return 1 if bad else 0


def status(f):
    with h5py.File(f, "r") as h:
        s = list(h["/replicas/status"][()])
        if "/central/status" in h:
            s += list(h["/central/status"][()])
    done = sum(1 for v in s if v >= 0)
    print(done, len(s) - done)
    return 0


def get(f, name, attr=None):
    with h5py.File(f, "r") as h:
        v = h[name].attrs[attr] if attr else h[name][()]
    print(v.decode() if isinstance(v, bytes) else v)
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "equal":
        sys.exit(equal(sys.argv[2], sys.argv[3], sys.argv[4:]))
    if cmd == "equal-attrs":
        sys.exit(equal(sys.argv[2], sys.argv[3], sys.argv[4:], attrs=True))
    if cmd == "status":
        sys.exit(status(sys.argv[2]))
    if cmd == "get":
        sys.exit(get(*sys.argv[2:]))
    sys.exit(f"unknown command {cmd}")
