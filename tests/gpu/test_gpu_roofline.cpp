// SPDX-License-Identifier: MIT
// The GPU worker's phases of model work (kernels/core/kernel_tally.hpp): timed by CUDA events
// around each launch group, counted, and kept as device intervals for the trace's device track.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/worker/worker.hpp>

#include "kernels/core/kernel_tally.hpp"
#include "tests/gpu/gpu_fixture.hpp"

namespace {

/// Runs replicas 0..last on a GPU worker and returns its tally's entry `name` (calls 0: none).
ef::KernelTally::Entry phase_of(const ef::Worker& w, const std::string& name) {
    REQUIRE(w.kernel_tally() != nullptr);
    for (const auto& e : w.kernel_tally()->entries())
        if (e.name == name) return e;
    return {};
}

std::unique_ptr<ef::Worker> run_gpu(const ef::FitProblem& pb, std::int64_t last) {
    ef::WorkUnit unit;
    for (std::int64_t r = 0; r <= last; ++r) unit.replicas.push_back(r);
    ef::WorkerOptions o;
    o.device = 0;
    auto w = ef::make_worker(ef::WorkerKind::gpu, pb, o);
    ef::ReplicaBlock out;
    w->run(unit, out);
    return w;
}

}  // namespace

TEST_CASE("gpu roofline: the batched path's rounds timed by CUDA events, with device intervals", "[gpu][roofline]") {
    const auto pb =
        ef_test::load_problem(ef_test::kSrc + "/inputs/dis-mellin.ini", {"--fit.replicas=64", "--fit.solver=qr"});

    const auto w = run_gpu(pb, 64);

    for (const char* name : {"resample", "moments", "gemm", "lm_steps"}) {
        const ef::KernelTally::Entry e = phase_of(*w, name);
        INFO(name);
        CHECK(e.calls > 0);
        CHECK(e.seconds > 0);
        CHECK(e.bytes > 0);
        CHECK(e.items > 0);
    }
    CHECK(phase_of(*w, "gemm").flops > 0);
    const auto& iv = w->kernel_tally()->intervals();
    REQUIRE(iv.size() >= 3);
    for (const auto& i : iv) CHECK(i.end >= i.begin);
}

TEST_CASE("gpu roofline: the per-replica path's LM kernel as one phase, its iterations counted", "[gpu][roofline]") {
    const auto pb = ef_test::load_problem(ef_test::kSrc + "/inputs/example.ini", {"--fit.replicas=200"});

    const auto w = run_gpu(pb, 200);

    const ef::KernelTally::Entry lm = phase_of(*w, "lm");
    CHECK(lm.calls >= 1);
    CHECK(lm.seconds > 0);
    CHECK(lm.items >= 201);  // at least one LM iteration per replica fit
    CHECK(w->kernel_tally()->intervals().size() == static_cast<size_t>(lm.calls));
}
