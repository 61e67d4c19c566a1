// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

#include <ensemblefit/recon/ptycho_dataset.hpp>
#include <ensemblefit/recon/recon_config.hpp>

#include "src/recon/beam_geometry.hpp"

namespace ef::recon {

/**
 * What a reconstruction decided once, as plain data handed down (FitPlan's counterpart,
 * kernels/fit/fit_plan.hpp): nothing after the set-up chooses any of it again. The first part
 * follows from the config and the data alone (plan_reconstruction(), the same on every rank);
 * the second from the workers every rank holds (the gradient sums, then deferred_steps()).
 */
struct ReconPlan {
    // ---- from the config and the data (plan_reconstruction) ----------------------------------
    bool subpixel = true;          ///< sub-pixel probe shifts (model.subpixel; auto: positions not whole, or corrected)
    double slice_fresnel = 0;      ///< multislice: lambda dz / dx^2 of a slice (multislice_geometry.hpp)
    int batch_size = 0;            ///< positions per mini-batch (solver.batch_size, auto resolved)
    bool probe_from_file = false;  ///< the initial probe is the data file's /probe (probe.init)
    int positions_start = 1;       ///< first iteration moving positions (positions.start, auto resolved)
    double positions_lr = 0;       ///< their Adam rate (positions.lr, auto resolved)
    double positions_pitch = 0;    ///< the scan pitch sqrt(scan area / positions) that max_travel = auto follows
    double positions_max_travel = 0;  ///< a position's largest distance from its start (positions.max_travel; 0: none)
    BeamGeometry geometry;         ///< wavelength, object pixel, convergence and their sources
    // ---- from the workers (Reconstruction::worker_ready) ------------------------------------
    bool device_sum = false;  ///< gradient sums on the GPUs instead of MPI over host buffers
    bool deferred = false;    ///< deferred steps: an iteration's batches queued on the device (tuning.deferred)
};

/// The dataset of `cfg` opened (open_ptycho_dataset). A data.scan_step given as a length is
/// turned into object pixels first, by the object pixel that beam_geometry finds for these data
/// (data.pixel_size, beam.kv with data.reciprocal_pixel_mrad, the data's dx_angstrom...);
/// usage_error naming data.scan_step when there is none.
PtychoDataset open_recon_dataset(const ReconConfig& cfg);

/// The decisions that follow from `cfg` and the opened dataset `ds`; usage_error (naming the
/// key) for a combination that cannot run: position correction without sub-pixel shifts,
/// slices that do not fit, probe.init = file without a probe in the file, probe.init = beam
/// without a wavelength, pixel or convergence.
ReconPlan plan_reconstruction(const ReconConfig& cfg, const PtychoDataset& ds);

/// Deferred steps need the gradients on the devices (`on_devices`: one rank, or sums on the
/// GPUs) and a worker that has them (`supported`); tuning.deferred = on without the first is a
/// usage_error. The same answer on every rank.
bool deferred_steps(const ReconConfig& cfg, bool on_devices, bool supported);

}  // namespace ef::recon
