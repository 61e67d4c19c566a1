#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch peer of `ensemblefit reconstruct`, written the way PtyRAD does it.

The same algorithm as the C++/CUDA worker (single slice, K mixed-state probe modes, sub-pixel
probe shifts by Fourier phase ramps, far-field FFT with norm="ortho", PtyRAD's amplitude loss
sqrt(mean((I^0.5 - D^0.5)^2)) / mean(D^0.5), Adam with separate learning rates, per-iteration
mode orthogonalisation and intensity constraint, optional position correction), expressed as
PtyRAD expresses it (ptyrad/models/ptycho.py, forward.py, losses.py, utils imshift_batch):

  - object amplitude and phase are two float32 nn.Parameters, combined with torch.polar;
  - the probe is a float32 (K, H, W, 2) nn.Parameter (view_as_real) seen as complex;
  - object patches come from advanced indexing with precomputed index grids;
  - sub-pixel shifts: ifft2(fft2(probe) * exp(-2 pi i (ky dy + kx dx))) for every position;
  - the model pattern is fftshift(sum_k |fft2(psi, norm="ortho")|^2) + 1e-10 (data stay centred);
  - autograd computes every gradient (the object's by scatter-add through the indexing);
  - torch.optim.Adam with one parameter group per tensor; float32 throughout, no AMP, no
    torch.compile (as in PtyRAD's speed benchmark, params/paper/ptyrad_tBL_WSe2_speed.yml).

Mini-batches are PtyRAD's GROUP_MODE random: a random permutation of the scan cut into batches.
Reads the native HDF5 layout of `ensemblefit simulate ptycho` (/data, /positions, root attribute
object_shape). Prints seconds per iteration (mean without the first) and writes JSON.

  python3 perf/peers/ptycho_torch.py --data bench.h5 --modes 12 --batch 256 --iterations 5 \\
      --position-correction --json peer.json
"""
import argparse
import json
import math
import time

import h5py
import numpy as np
import torch


def initial_probe(mean_dp, modes, mode_power):
    """Like ensemblefit's probe.init = mean-pattern: ifft (ortho) of sqrt(mean pattern), centred,
    extra modes = mode 0 times x, y, xy, x^2-y^2, ... orthogonalised, each with mode_power."""
    h, w = mean_dp.shape
    amp = np.sqrt(np.maximum(np.fft.ifftshift(mean_dp), 0))  # to FFT order
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.fftfreq(w)[None, :]
    spec = amp * np.exp(-2j * np.pi * (fy * (h // 2) + fx * (w // 2)))
    p0 = np.fft.ifft2(spec, norm="ortho")
    total = mean_dp.sum()
    inten = np.abs(p0) ** 2
    yy, xx = np.mgrid[0:h, 0:w]
    cy, cx = (inten * yy).sum() / inten.sum(), (inten * xx).sum() / inten.sum()
    r = max(1.0, math.sqrt((inten * ((yy - cy) ** 2 + (xx - cx) ** 2)).sum() / inten.sum()))
    y, x = (yy - cy) / r, (xx - cx) / r
    polys = [x, y, x * y, x * x - y * y, x * x + y * y]
    probe = [p0]
    for k in range(1, modes):
        f = polys[(k - 1) % 5] * (x * x + y * y + 1) ** ((k - 1) // 5)
        m = p0 * f
        for q in probe:
            m = m - np.vdot(q, m) / np.vdot(q, q) * q
        probe.append(m)
    probe = np.stack(probe)
    powers = [(1 - mode_power * (modes - 1)) * total] + [mode_power * total] * (modes - 1)
    for k in range(modes):
        probe[k] *= math.sqrt(powers[k] / (np.abs(probe[k]) ** 2).sum())
    return probe


def orthogonalize(probe):
    """PtyRAD's ortho_pmode: SVD of the (K, H*W) probe; modes sorted by power."""
    k, h, w = probe.shape
    u, s, vh = torch.linalg.svd(probe.reshape(k, h * w), full_matrices=False)
    return (s[:, None].to(probe.dtype) * vh).reshape(k, h, w)


def phase_nrmse(obj, truth, roi):
    y0, y1, x0, x1 = (int(v) for v in roi)
    r, t = obj[y0:y1, x0:x1], truth[y0:y1, x0:x1]
    d = r * np.conj(t)
    off = np.sum(d / np.maximum(np.abs(d), 1e-30))
    e = np.angle(d * np.conj(off) / abs(off))
    yy, xx = np.mgrid[y0:y1, x0:x1]
    a = np.stack([np.ones(e.size), (yy - yy.mean()).ravel(), (xx - xx.mean()).ravel()], 1)
    coef, *_ = np.linalg.lstsq(a, e.ravel(), rcond=None)
    res = e.ravel() - a @ coef
    return float(np.sqrt(np.mean(res ** 2)) / np.std(np.angle(t)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--modes", type=int, default=12)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--lr-obj", type=float, default=5e-4, help="amplitude and phase (PtyRAD obja, objp)")
    ap.add_argument("--lr-probe", type=float, default=1e-3,
                    help="relative to the rms probe amplitude, as ensemblefit's probe.lr")
    ap.add_argument("--lr-pos", type=float, default=5e-4)
    ap.add_argument("--mode-power", type=float, default=0.02)
    ap.add_argument("--position-correction", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    t_load = time.perf_counter()
    with h5py.File(args.data, "r") as f:
        dps = torch.from_numpy(f["/data"][...].astype(np.float32)).to(dev)  # (N, H, W), centred
        pos = f["/positions"][...].astype(np.float64)
        n_obj = [int(v) for v in f.attrs["object_shape"]]
        truth = f["/truth/object"][...] if "/truth/object" in f else None
    n, h, w = dps.shape
    crop = np.clip(np.rint(pos), 0, [n_obj[0] - h, n_obj[1] - w]).astype(np.int64)
    crop_t = torch.from_numpy(crop).to(dev)
    shifts = torch.nn.Parameter(torch.from_numpy(pos - crop).float().to(dev))  # PtyRAD probe_pos_shifts

    mean_dp = dps.mean(0).double().cpu().numpy()
    probe0 = initial_probe(mean_dp, args.modes, args.mode_power)
    probe = torch.nn.Parameter(torch.view_as_real(torch.from_numpy(probe0.astype(np.complex64))).to(dev).contiguous())
    with torch.no_grad():
        probe.copy_(torch.view_as_real(orthogonalize(torch.view_as_complex(probe))))
    total = float(mean_dp.sum())
    obja = torch.nn.Parameter(torch.ones(n_obj, device=dev))
    objp = torch.nn.Parameter(torch.zeros(n_obj, device=dev))
    p_rms = math.sqrt(total / (h * w))
    groups = [{"params": [obja], "lr": args.lr_obj}, {"params": [objp], "lr": args.lr_obj},
              {"params": [probe], "lr": args.lr_probe * p_rms}]
    if args.position_correction:
        groups.append({"params": [shifts], "lr": args.lr_pos})
    opt = torch.optim.Adam(groups)  # PyTorch defaults: betas (0.9, 0.999), eps 1e-8

    ky = torch.fft.fftfreq(h, device=dev)[:, None]
    kx = torch.fft.fftfreq(w, device=dev)[None, :]
    ry = torch.arange(h, device=dev)[None, :, None]
    rx = torch.arange(w, device=dev)[None, None, :]
    sqrt_dps = dps.sqrt()
    torch.cuda.synchronize() if dev.type == "cuda" else None
    load_s = time.perf_counter() - t_load

    def forward(idx):
        obj = torch.polar(obja, objp)
        patches = obj[crop_t[idx, 0, None, None] + ry, crop_t[idx, 1, None, None] + rx]  # (B, H, W)
        pr = torch.view_as_complex(probe)
        s = shifts[idx]
        ramp = torch.exp(-2j * math.pi * (s[:, 0, None, None] * ky + s[:, 1, None, None] * kx))  # (B, H, W)
        shifted = torch.fft.ifft2(torch.fft.fft2(pr)[None] * ramp[:, None])  # imshift_batch: (B, K, H, W)
        psi = shifted * patches[:, None]
        inten = (torch.fft.fft2(psi, norm="ortho").abs() ** 2).sum(1)
        return torch.fft.fftshift(inten, dim=(-2, -1)) + 1e-10

    losses, times = [], []
    for it in range(args.iterations):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        perm = torch.randperm(n, device=dev)
        batches = perm.split(args.batch)
        acc = 0.0
        for idx in batches:
            opt.zero_grad(set_to_none=True)
            model = forward(idx)
            loss = torch.sqrt(torch.mean((model.sqrt() - sqrt_dps[idx]) ** 2)) / sqrt_dps[idx].mean()
            loss.backward()
            opt.step()
            acc += loss.detach()
        with torch.no_grad():  # constraints every iteration: ortho_pmode, fix_probe_int
            pr = orthogonalize(torch.view_as_complex(probe))
            pr = pr * math.sqrt(total) / pr.abs().pow(2).sum().sqrt()
            probe.copy_(torch.view_as_real(pr))
        losses.append(float(acc) / len(batches))
        if dev.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        print(f"  iter {it + 1:4d}  loss {losses[-1]:.6g}  {times[-1]:.4f} s", flush=True)
    per_iter = float(np.mean(times[1:])) if len(times) > 1 else float(times[0])
    result = {"peer": "pytorch (PtyRAD style)", "torch": torch.__version__, "device": str(
        torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"), "patterns": n, "window": [h, w],
        "modes": args.modes, "batch": args.batch, "iterations": args.iterations, "load_seconds": load_s,
        "seconds_per_iteration": per_iter, "iteration_seconds": times, "loss": losses,
        "position_correction": args.position_correction}
    if dev.type == "cuda":
        result["max_memory_gib"] = torch.cuda.max_memory_allocated(dev) / 2 ** 30
    if truth is not None:
        obj = torch.polar(obja, objp).detach().cpu().numpy()
        py, px = pos[:, 0], pos[:, 1]
        roi = [math.ceil(py.min() + h / 2), math.floor(py.max() + h / 2) + 1, math.ceil(px.min() + w / 2),
               math.floor(px.max() + w / 2) + 1]
        result["phase_nrmse"] = phase_nrmse(obj, truth, roi)
    print(f"peer: {per_iter:.4f} s per iteration (mean without the first), {n} patterns {h}x{w}, "
          f"{args.modes} modes, batch {args.batch}" +
          (f", phase NRMSE {100 * result['phase_nrmse']:.3f}%" if "phase_nrmse" in result else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
