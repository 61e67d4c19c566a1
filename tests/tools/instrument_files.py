#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Instrument-format files written independently of ensemblefit (numpy and h5py only), from a
native file of `ensemblefit simulate ptycho` (/data N x H x W centred, /positions N x 2), for
tests/mpi/recon_instrument.sh.

  empad SRC.h5 OUT.raw [--rows R] [--drop-bytes B] [--frames K]
      EMPAD raw: each frame H x W float32 little-endian followed by 2 metadata rows (filled with
      large numbers that must not reach a reconstruction); --rows R writes R - 2 data rows per
      frame instead of H (a wrong frame size); --drop-bytes B cuts B bytes off the end
      (truncated); --frames K writes the first K frames only (or repeats the last ones past N).
  fourd SRC.h5 OUT.h5 NY NX PATH [--rank3]
      the patterns as a 4-D array [NY, NX, H, W] at PATH (py4DSTEM's datacube layout);
      --rank3 keeps N x H x W (a wrong rank).
  positions SRC.h5 OUT.txt    /positions as 'y x' lines (numpy.savetxt, every digit of a double)
  hot SRC.h5 OUT.h5 Y X FACTOR      pixel (Y, X) of every pattern set to FACTOR x the mean pattern's peak
  shift SRC.h5 OUT.h5 DY DX         every pattern moved by (DY, DX) pixels (zeros shifted in)
  background SRC.h5 OUT.h5 B        B subtracted from every count; prints the negative count
"""
import shutil
import sys

import h5py
import numpy as np


def data(src):
    with h5py.File(src, "r") as f:
        return f["/data"][...].astype(np.float32)


def empad(args):
    src, out = args[0], args[1]
    rows = drop = None
    frames = None
    i = 2
    while i < len(args):
        if args[i] == "--rows":
            rows = int(args[i + 1])
        elif args[i] == "--drop-bytes":
            drop = int(args[i + 1])
        elif args[i] == "--frames":
            frames = int(args[i + 1])
        i += 2
    d = data(src)
    n, h, w = d.shape
    if rows is not None:  # another detector: rows - 2 data rows
        d = d[:, : rows - 2, :] if rows - 2 <= h else np.concatenate([d, np.zeros((n, rows - 2 - h, w), np.float32)], 1)
    if frames is not None:
        d = d[:frames] if frames <= n else np.concatenate([d, d[-(frames - n):]], 0)
    meta = np.full((d.shape[0], 2, w), 3.0e9, np.float32)  # what the detector writes there is not data
    meta[:, 0, 0] = np.arange(d.shape[0])
    frames_out = np.concatenate([d, meta], axis=1).astype("<f4")
    raw = frames_out.tobytes()
    if drop:
        raw = raw[:-drop]
    with open(out, "wb") as f:
        f.write(raw)


def fourd(args):
    src, out, ny, nx, path = args[0], args[1], int(args[2]), int(args[3]), args[4]
    d = data(src)
    n, h, w = d.shape
    arr = d if "--rank3" in args else d.reshape(ny, nx, h, w)
    with h5py.File(out, "w") as f:
        f.create_dataset(path, data=arr, chunks=(1,) + arr.shape[1:] if arr.ndim == 4 else None)
        f.attrs["note"] = "4-D datacube written by tests/tools/instrument_files.py"


def positions(args):
    with h5py.File(args[0], "r") as f:
        p = f["/positions"][...]
    np.savetxt(args[1], p, fmt="%.17g", header="y x (pixels)")


def modify(src, out, fn):
    shutil.copy(src, out)
    with h5py.File(out, "r+") as f:
        d = f["/data"][...].astype(np.float32)
        f["/data"][...] = fn(d)


def hot(args):
    y, x, factor = int(args[2]), int(args[3]), float(args[4])

    def plant(d):
        d[:, y, x] = factor * d.mean(0).max()
        return d

    modify(args[0], args[1], plant)


def shift(args):
    dy, dx = int(args[2]), int(args[3])

    def move(d):
        out = np.zeros_like(d)
        h, w = d.shape[1:]
        out[:, max(dy, 0): h + min(dy, 0), max(dx, 0): w + min(dx, 0)] = d[:, max(-dy, 0): h - max(dy, 0),
                                                                             max(-dx, 0): w - max(dx, 0)]
        return out

    modify(args[0], args[1], move)


def background(args):
    b = float(args[2])
    count = [0]

    def subtract(d):
        d = d - np.float32(b)
        count[0] = int((d < 0).sum())
        return d

    modify(args[0], args[1], subtract)
    print(count[0])


if __name__ == "__main__":
    {"empad": empad, "fourd": fourd, "positions": positions, "hot": hot, "shift": shift,
     "background": background}[sys.argv[1]](sys.argv[2:])
