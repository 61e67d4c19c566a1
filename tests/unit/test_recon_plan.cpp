// SPDX-License-Identifier: MIT
// ReconPlan: the reconstruction's decisions made once from the config and the data (sub-pixel
// shifts, batch size, the probe's source) and the deferred steps' rule.
#include <string>

#include <catch2/catch.hpp>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/recon/ptycho_dataset.hpp>
#include <ensemblefit/recon/recon_config.hpp>

#include "src/recon/recon_plan.hpp"

namespace {

ef::PtychoDataset dataset(bool whole_positions, bool has_probe) {
    ef::PtychoDataset ds;
    ds.path = "scan.h5";
    ds.count = 40;
    ds.h = ds.w = 16;
    ds.obj_h = ds.obj_w = 64;
    for (std::int64_t i = 0; i < ds.count; ++i) {
        ds.positions.push_back(static_cast<double>(i % 8) * 4 + (whole_positions ? 0.0 : 0.25));
        ds.positions.push_back(static_cast<double>(i / 8) * 4);
    }
    ds.has_probe = has_probe;
    return ds;
}

}  // namespace

TEST_CASE("ReconPlan: sub-pixel shifts, batch size and the probe's source, decided once", "[recon][plan]") {
    ef::ReconConfig cfg;
    cfg.config_file = "r.ini";

    const ef::recon::ReconPlan whole = ef::recon::plan_reconstruction(cfg, dataset(true, false));
    const ef::recon::ReconPlan fractional = ef::recon::plan_reconstruction(cfg, dataset(false, true));
    cfg.correct_positions = true;
    const ef::recon::ReconPlan corrected = ef::recon::plan_reconstruction(cfg, dataset(true, false));
    cfg.batch_size = 8;
    cfg.probe_init = "mean-pattern";
    const ef::recon::ReconPlan given = ef::recon::plan_reconstruction(cfg, dataset(true, true));

    CHECK(!whole.subpixel);  // auto: whole positions, not corrected
    CHECK(!whole.probe_from_file);
    CHECK(whole.batch_size == 16);  // auto: ceil(40 / 16) within 16..256
    CHECK(fractional.subpixel);
    CHECK(fractional.probe_from_file);  // probe.init = auto and the file has one
    CHECK(corrected.subpixel);
    CHECK(given.batch_size == 8);
    CHECK(!given.probe_from_file);
    CHECK(!whole.device_sum);  // decided later, from the workers
    CHECK(!whole.deferred);
}

TEST_CASE("ReconPlan: refusals name the key; deferred steps need the gradients on the devices", "[recon][plan]") {
    ef::ReconConfig cfg;
    cfg.config_file = "r.ini";
    cfg.correct_positions = true;
    cfg.subpixel = "off";
    ef::ReconConfig file_probe;
    file_probe.config_file = "r.ini";
    file_probe.probe_init = "file";
    ef::ReconConfig on;
    on.config_file = "r.ini";
    on.tuning.deferred = ef::TuningSwitch::on;

    CHECK_THROWS_WITH(ef::recon::plan_reconstruction(cfg, dataset(true, false)),
                      "r.ini: positions.correct: position correction needs model.subpixel = on or auto");
    CHECK_THROWS_WITH(ef::recon::plan_reconstruction(file_probe, dataset(true, false)),
                      "r.ini: probe.init: 'scan.h5' has no probe");
    CHECK(ef::recon::deferred_steps(on, true, true));
    CHECK(!ef::recon::deferred_steps(on, true, false));  // a CPU worker has none
    CHECK(!ef::recon::deferred_steps(cfg, false, true));  // auto: several ranks summing on the host
    CHECK_THROWS_AS(ef::recon::deferred_steps(on, false, true), ef::Error);
}
