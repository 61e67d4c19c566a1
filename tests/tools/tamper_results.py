#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Malformed copies of a real fit result file, written by an independent writer (h5py), for the
tests that every read of a result file validates shapes and codes before use (issue 39).

  tamper_results.py KIND SRC.h5 DST.h5

KIND:
  params-wide     /replicas/params one column wider than the parameter list
  index-short     /replicas/index one row shorter than /replicas/params
  status-unknown  /replicas/status row 1 holds 7 (codes are -1..2)
  central-status  /central/status holds -5
  drop-param      the last parameter gone from param_names and every dataset (consistent with
                  each other), the stored config unchanged: it names one parameter more
  config-param    the stored config (canonical_config) names a parameter `extra` more, used by
                  its formula; param_names and the datasets unchanged
  correlation-wide  /central/correlation one row and column wider than the parameter list
  names-fixed     param_names as fixed-length strings (this program writes variable-length ones)
  seed-text       replicas_total as text, not a number
"""
import shutil
import sys

import h5py
import numpy as np


def replace(f, name, data):
    attrs = dict(f[name].attrs)
    del f[name]
    f.create_dataset(name, data=data)
    for k, v in attrs.items():
        f[name].attrs[k] = v


def drop_param(f):
    names = [n.decode() if isinstance(n, bytes) else n for n in f.attrs["param_names"]]
    f.attrs.create("param_names", np.array(names[:-1], dtype=object), dtype=h5py.string_dtype())
    replace(f, "/replicas/params", f["/replicas/params"][()][:, :-1])
    replace(f, "/central/params", f["/central/params"][()][:-1])
    for m in ("covariance", "covariance_unscaled", "correlation"):
        if "/central/" + m in f:
            replace(f, "/central/" + m, f["/central/" + m][()][:-1, :-1])
    if "/summary" in f:
        del f["/summary"]


def config_param(f):
    text = f.attrs["canonical_config"]
    text = text.decode() if isinstance(text, bytes) else text
    lines = text.split("\n")
    out = []
    for line in lines:
        if line.startswith("formula = "):
            line += " + extra"
        if line == "[fit]":
            out += ["[param.extra]", "start = 0", "lower = -inf", "upper = inf", "fixed = false"]
        out.append(line)
    f.attrs["canonical_config"] = "\n".join(out)


def main():
    kind, src, dst = sys.argv[1:4]
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        if kind == "params-wide":
            p = f["/replicas/params"][()]
            replace(f, "/replicas/params", np.hstack([p, np.full((p.shape[0], 1), 1.0e300)]))
        elif kind == "index-short":
            replace(f, "/replicas/index", f["/replicas/index"][()][:-1])
        elif kind == "status-unknown":
            s = f["/replicas/status"][()]
            s[1] = 7
            replace(f, "/replicas/status", s)
        elif kind == "central-status":
            replace(f, "/central/status", np.array([-5], dtype=np.int64))
        elif kind == "drop-param":
            drop_param(f)
        elif kind == "config-param":
            config_param(f)
        elif kind == "names-fixed":
            names = [n.decode() if isinstance(n, bytes) else n for n in f.attrs["param_names"]]
            f.attrs["param_names"] = np.array([n.encode() for n in names])
        elif kind == "seed-text":
            f.attrs["replicas_total"] = "many"
        elif kind == "correlation-wide":
            c = f["/central/correlation"][()]
            replace(f, "/central/correlation", np.pad(c, ((0, 1), (0, 1))))
        else:
            sys.exit(f"tamper_results.py: unknown kind '{kind}'")


if __name__ == "__main__":
    main()
