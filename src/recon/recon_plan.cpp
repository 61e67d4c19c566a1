// SPDX-License-Identifier: MIT
#include "src/recon/recon_plan.hpp"

#include <cmath>

#include <ensemblefit/core/error.hpp>

#include "src/recon/multislice_geometry.hpp"
#include "src/recon/step_defaults.hpp"

namespace ef::recon {

PtychoDataset open_recon_dataset(const ReconConfig& cfg) {
    const ScanGeometry& sc = cfg.input.scan;
    const bool listed = !sc.positions_file.empty();
    const char* key = listed ? "data.positions_unit" : "data.scan_step";
    if (listed ? !(sc.positions_unit > 0) : !(sc.step_length_y > 0))
        return open_ptycho_dataset(cfg.data_file, cfg.data_format, cfg.pixel_size, cfg.margin, cfg.input);
    // The object pixel depends on the frames (their width after crop and bin), not on the scan:
    // open with a 1-pixel step or scale (and without data.truth, which would refuse that scan)
    // to learn it, then open again with the scan in pixels.
    InstrumentOptions in = cfg.input;
    in.scan.step_y = in.scan.step_x = in.scan.positions_scale = 1;
    in.truth_file.clear();
    const BeamGeometry g =
        beam_geometry(cfg, open_ptycho_dataset(cfg.data_file, cfg.data_format, cfg.pixel_size, cfg.margin, in));
    in.truth_file = cfg.input.truth_file;
    if (!(g.pixel > 0))
        throw usage_error(cfg.where(key) + ": a scan given in lengths needs the object pixel size: data.pixel_size, "
                          "or beam.kv with data.reciprocal_pixel_mrad (or the data's dx_angstrom); or give it in "
                          "object pixels");
    in.scan.step_y = sc.step_length_y / g.pixel;
    in.scan.step_x = sc.step_length_x / g.pixel;
    in.scan.positions_scale = sc.positions_unit / g.pixel;
    return open_ptycho_dataset(cfg.data_file, cfg.data_format, cfg.pixel_size, cfg.margin, in);
}

ReconPlan plan_reconstruction(const ReconConfig& cfg, const PtychoDataset& ds) {
    ReconPlan plan;
    bool integer_positions = true;
    for (double p : ds.positions) integer_positions = integer_positions && std::abs(p - std::nearbyint(p)) < 1e-6;
    plan.subpixel = cfg.subpixel == "on" || (cfg.subpixel == "auto" && (!integer_positions || cfg.correct_positions));
    if (cfg.correct_positions && cfg.subpixel == "off")
        throw usage_error(cfg.where("positions.correct") + ": position correction needs model.subpixel = on or auto");
    check_slices_fit(cfg, ds);
    plan.geometry = beam_geometry(cfg, ds);
    plan.slice_fresnel = slice_fresnel(cfg, ds, plan.geometry);
    if (cfg.probe_init == "file" && !ds.has_probe)
        throw usage_error(cfg.where("probe.init") + ": '" + ds.path + "' has no probe");
    plan.probe_from_file = cfg.probe_init == "file" || (cfg.probe_init == "auto" && ds.has_probe);
    plan.batch_size = resolve_batch_size(cfg.batch_size, ds.count);  // auto: from the positions, on every rank alike
    plan.positions_start = resolve_positions_start(cfg.positions_start, cfg.iterations);
    plan.positions_lr = resolve_positions_lr(cfg.lr_positions, cfg.iterations, plan.positions_start);
    plan.positions_pitch = scan_pitch(ds.positions);
    plan.positions_max_travel = resolve_positions_max_travel(cfg.max_travel_positions, plan.positions_pitch);
    if (cfg.probe_init == "beam") {
        const BeamGeometry& g = plan.geometry;
        const char* missing = !(g.wavelength > 0) ? "beam.kv (or model.wavelength, or the data's kv)"
                              : !(g.pixel > 0)
                                  ? "data.pixel_size (or data.reciprocal_pixel_mrad, or the data's dx_angstrom)"
                              : !(g.convergence > 0) ? "beam.convergence_mrad (or the data's conv_angle_mrad)"
                                                     : nullptr;
        if (missing)
            throw usage_error(cfg.where("probe.init") + ": beam needs " + missing + "; '" + ds.path + "' has none");
    }
    return plan;
}

bool deferred_steps(const ReconConfig& cfg, bool on_devices, bool supported) {
    if (cfg.tuning.deferred == TuningSwitch::on && !on_devices)
        throw usage_error(cfg.where("tuning.deferred") +
                          ": deferred steps need the gradients on the devices (one rank, or sums on the GPUs)");
    return supported && on_devices;
}

}  // namespace ef::recon
