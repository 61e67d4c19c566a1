// SPDX-License-Identifier: MIT
// The roofline's bookkeeping on numbers small enough to check by hand: a worker's KernelTally
// (phases, host-clock marks, bounded device intervals), the row names, the POP host/device split.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "kernels/core/kernel_tally.hpp"
#include "src/report/kernel_roofline.hpp"

namespace {

TEST_CASE("a kernel tally sums each phase in first-use order and bounds its device intervals", "[roofline]") {
    ef::KernelTally t(2);
    const auto now = ef::KernelTally::Clock::now();

    t.add("gemm", 0.5, 100, 40, 2);
    t.add("moments", 0.25);
    t.add("gemm", 0.5, 100, 40, 2);
    for (int i = 0; i < 3; ++i) t.interval_ending("gemm", now, 1e-3);

    REQUIRE(t.entries().size() == 2);
    CHECK(t.entries()[0].name == "gemm");
    CHECK(t.entries()[0].seconds == 1.0);
    CHECK(t.entries()[0].flops == 200);
    CHECK(t.entries()[0].bytes == 80);
    CHECK(t.entries()[0].items == 4);
    CHECK(t.entries()[0].calls == 2);
    CHECK(t.seconds() == 1.25);
    CHECK(t.intervals().size() == 2);
    CHECK(t.dropped_intervals() == 1);
    CHECK(std::chrono::duration<double>(t.intervals()[0].end - t.intervals()[0].begin).count() == Approx(1e-3));
}

TEST_CASE("host phase marks: a phase runs from its mark to the next, with what was counted meanwhile", "[roofline]") {
    ef::HostPhaseMarks m;

    m.mark("fft");
    m.count(ef::fft_flops(1024, 2), 64);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    m.mark("step");
    m.mark("");  // ends "step"; opens nothing
    m.count(1, 1);  // no open phase: not counted anywhere
    m.mark("");

    REQUIRE(m.tally().entries().size() == 2);
    CHECK(m.tally().entries()[0].name == "fft");
    CHECK(m.tally().entries()[0].seconds >= 0.004);
    CHECK(m.tally().entries()[0].flops == 2 * 5.0 * 1024 * 10);  // 5 n log2 n per transform
    CHECK(m.tally().entries()[0].bytes == 64);
    CHECK(m.tally().entries()[1].name == "step");
    CHECK(m.tally().entries()[1].flops == 0);
}

TEST_CASE("row names: HDF5-safe, GPU rows prefixed", "[roofline]") {
    ef::KernelSum s;
    s.name = "probe spectrum, positions";
    CHECK(ef::kernel_row_name(s) == "probe_spectrum_positions");
    s.gpu = true;
    s.name = "gemm";
    CHECK(ef::kernel_row_name(s) == "gpu_gemm");
}

TEST_CASE("host/device split: offload, device load balance, communication and orchestration", "[roofline]") {
    // Rank 0 a CPU rank; ranks 1 and 2 GPU ranks: 4 and 2 s of compute phase, 3 and 1 s of
    // kernels, 1 s of device-side sums on rank 1; runtime 5 s, host parallel efficiency 0.8.
    std::vector<ef::RankTiming> ranks(3);
    ranks[0].phase[static_cast<size_t>(ef::Phase::compute)] = 4.5;
    ranks[1].phase[static_cast<size_t>(ef::Phase::compute)] = 4.0;
    ranks[2].phase[static_cast<size_t>(ef::Phase::compute)] = 2.0;
    ef::DeviceTimes d;
    d.kernels = {-1.0, 3.0, 1.0};
    d.transfers = {0.0, 1.0, 0.0};

    const ef::DeviceSplit s = ef::device_split(ranks, d, 5.0, 0.8);

    CHECK(s.gpu_ranks == 2);
    CHECK(s.offload == Approx(4.0 / 6.0));                // kernel over compute seconds of the GPU ranks
    CHECK(s.host() == Approx(0.8 * 4.0 / 6.0));
    CHECK(s.device_load_balance == Approx(2.0 / 3.0));    // mean 2 over max 3
    CHECK(s.device_communication == Approx(3.0 / 4.0));   // max kernels over max kernels + sums
    CHECK(s.orchestration == Approx(4.0 / 5.0));          // the busiest device over the runtime
    CHECK(s.device() == Approx(2.0 / 5.0));               // mean device seconds over the runtime

    d.kernels = {-1.0, -1.0, -1.0};
    CHECK(ef::device_split(ranks, d, 5.0, 0.8).gpu_ranks == 0);  // no GPU rank: no split
}

}  // namespace
