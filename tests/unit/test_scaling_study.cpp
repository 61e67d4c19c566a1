// SPDX-License-Identifier: MIT
// `ensemblefit report`'s scaling arithmetic on numbers checked by hand: strong and weak scaling,
// the detection of either from the items the ranks did, forced modes, and mixed GPU + CPU runs.
#include <catch2/catch.hpp>

#include <string>

#include "src/report/scaling_study.hpp"

namespace {

ef::ScalingInput run(int gpu, int cpu, double items, double seconds) {
    ef::ScalingInput r;
    r.workers.gpu = gpu;
    r.workers.cpu = cpu;
    r.items = items;
    r.runtime = seconds;
    return r;
}

TEST_CASE("strong scaling: speedup T1/TN, efficiency speedup/N", "[scaling]") {
    const auto base = run(0, 1, 2561, 80.0);
    const auto p = ef::scaling_point(run(0, 64, 2561, 1.6), base, ef::ScalingMode::automatic);
    CHECK(p.mode == ef::ScalingMode::strong);
    CHECK(p.unit_ratio == 64.0);
    CHECK(p.speedup == Approx(50.0));
    CHECK(p.efficiency == Approx(50.0 / 64.0));
    // GPU ranks: the 25,600-replica stats2, 11.67 s on 1 GPU and 5.66 s on 4.
    const auto g = ef::scaling_point(run(4, 0, 25601, 5.66), run(1, 0, 25601, 11.67), ef::ScalingMode::automatic);
    CHECK(g.mode == ef::ScalingMode::strong);
    CHECK(g.efficiency == Approx(11.67 / 5.66 / 4));
}

TEST_CASE("weak scaling: efficiency T1/TN, scaled speedup N x T1/TN", "[scaling]") {
    // The CPU ranks at 40 replicas per rank (+ the central fit): 7.77 s on 1, 23.1 s on 64.
    const auto base = run(0, 1, 41, 7.77);
    const auto p = ef::scaling_point(run(0, 64, 64 * 40 + 1, 23.1), base, ef::ScalingMode::automatic);
    CHECK(p.mode == ef::ScalingMode::weak);
    CHECK(p.efficiency == Approx(7.77 / 23.1));  // 0.336, not the 0.337 "speedup" of a strong report
    CHECK(p.speedup == Approx(64 * 7.77 / 23.1));
    CHECK(p.assumed_work == 64.0);
}

TEST_CASE("a forced mode takes its work ratio whatever the items say", "[scaling]") {
    const auto base = run(0, 1, 41, 8.0);
    const auto now = run(0, 4, 161, 10.0);
    const auto weak = ef::scaling_point(now, base, ef::ScalingMode::weak);
    CHECK(weak.mode == ef::ScalingMode::weak);
    CHECK(weak.efficiency == Approx(0.8));
    CHECK(weak.speedup == Approx(3.2));
    const auto strong = ef::scaling_point(now, base, ef::ScalingMode::strong);
    CHECK(strong.mode == ef::ScalingMode::strong);
    CHECK(strong.speedup == Approx(0.8));
    CHECK(strong.efficiency == Approx(0.2));
}

TEST_CASE("work neither constant nor proportional: throughput ratio, mode other", "[scaling]") {
    const auto p = ef::scaling_point(run(0, 4, 200, 10.0), run(0, 1, 100, 10.0), ef::ScalingMode::automatic);
    CHECK(p.mode == ef::ScalingMode::automatic);
    CHECK(std::string(ef::to_string(p.mode)) == "other");
    CHECK(p.work_ratio == 2.0);
    CHECK(p.speedup == Approx(2.0));
    CHECK(p.efficiency == Approx(0.5));
}

TEST_CASE("detection: within 10 % of 1 is strong, of N is weak; the baseline's size tells nothing", "[scaling]") {
    CHECK(ef::detect_scaling_mode(1.0, 1.0) == ef::ScalingMode::strong);
    CHECK(ef::detect_scaling_mode(1.05, 8.0) == ef::ScalingMode::strong);
    CHECK(ef::detect_scaling_mode(7.5, 8.0) == ef::ScalingMode::weak);
    CHECK(ef::detect_scaling_mode(4.0, 8.0) == ef::ScalingMode::automatic);  // 4x the work on 8x the ranks: far from both
    CHECK(ef::detect_scaling_mode(5.0 / 3, 2.0) == ef::ScalingMode::weak);   // 2 per rank + 1: 3, 5, 9
    CHECK(ef::detect_scaling_mode(3.0, 4.0) == ef::ScalingMode::weak);
    CHECK(ef::detect_scaling_mode(640.0 / 41, 4.0) == ef::ScalingMode::automatic);  // far from both
    CHECK(ef::detect_scaling_mode(0.0, 8.0) == ef::ScalingMode::automatic);
    const auto base = run(0, 1, 41, 1);
    CHECK(ef::detect_study_mode({base, run(0, 2, 81, 1), run(0, 64, 2561, 1)}, base) == ef::ScalingMode::weak);
    CHECK(ef::detect_study_mode({base, run(0, 2, 41, 1), run(0, 64, 41, 1)}, base) == ef::ScalingMode::strong);
    // disagreeing runs, or only runs of the baseline's size: undecided
    CHECK(ef::detect_study_mode({base, run(0, 2, 41, 1), run(0, 64, 2561, 1)}, base) == ef::ScalingMode::automatic);
    CHECK(ef::detect_study_mode({base, run(0, 1, 41, 2)}, base) == ef::ScalingMode::automatic);
}

TEST_CASE("workers from placement rows: gpu, cpu and mixed groups", "[scaling]") {
    const auto m = ef::worker_mix({"0\tnode1\tgpu 0: NVIDIA H100 80GB HBM3\t1\t0\tnone\t0",
                                   "1\tnode1\tgpu 1: NVIDIA H100 80GB HBM3\t1\t1\tnone\t1",
                                   "2\tnode1\tcpu, 1 thread\t1\t2\tcores\tnone"});
    CHECK(m.gpu == 2);
    CHECK(m.cpu == 1);
    CHECK(m.group() == "mixed");
    CHECK(ef::worker_mix({"0\th\tcpu, 4 threads\t4"}).group() == "cpu");
    CHECK(ef::worker_mix({"0\th\tgpu 0: X\t1"}).group() == "gpu");
    CHECK(ef::worker_mix({}).ranks() == 0);
}

TEST_CASE("mixed runs against their parts' throughputs", "[scaling]") {
    // 4 GPU ranks alone: 25,600 items in 2.5 s; a CPU rank alone: 40 items in 8 s (5 per second).
    const auto gpu4 = run(4, 0, 25600, 2.5);
    const double gpu_rank = ef::rank_throughput(gpu4);
    CHECK(gpu_rank == Approx(2560.0));
    const double cpu_rank = ef::rank_throughput(run(0, 1, 40, 8.0));
    CHECK(cpu_rank == Approx(5.0));
    // 4 GPUs + 60 CPU ranks ideally deliver 4 x 2560 + 60 x 5 = 10,540 items per second.
    CHECK(ef::mixed_efficiency(run(4, 60, 25600, 20.6), gpu_rank, cpu_rank) == Approx(25600 / 20.6 / 10540.0));
    CHECK(ef::mixed_efficiency(run(4, 60, 25600, 25600 / 10540.0), gpu_rank, cpu_rank) == Approx(1.0));
    // without a CPU baseline only the GPUs' part is known; without any, nothing
    CHECK(ef::mixed_efficiency(run(4, 60, 25600, 2.5), gpu_rank, 0.0) == Approx(1.0));
    CHECK(ef::mixed_efficiency(run(4, 60, 25600, 2.5), 0.0, 0.0) == 0.0);
}

}  // namespace

TEST_CASE("a study counts cores: 1 rank x 2 threads is 2 units, as 2 ranks x 1 thread", "[scaling]") {
    const ef::WorkerMix threads = ef::worker_mix({"0\tvm\tcpu, 2 threads\t2\t0-1\tauto, free\t-"});
    const ef::WorkerMix ranks = ef::worker_mix({"0\tvm\tcpu, 1 thread\t1\t0\tauto, free\t-",
                                                "1\tvm\tcpu, 1 thread\t1\t1\tauto, free\t-"});
    CHECK(threads.ranks() == 1);
    CHECK(threads.units() == 2);
    CHECK(ranks.units() == 2);
    ef::ScalingInput a{threads, 41, 5.0}, b{ranks, 41, 4.0};
    const auto p = ef::scaling_point(a, run(0, 1, 41, 8.0), ef::ScalingMode::automatic);
    CHECK(p.unit_ratio == 2.0);
    CHECK(p.efficiency == Approx(8.0 / 5.0 / 2));
    CHECK(ef::scaling_point(b, run(0, 1, 41, 8.0), ef::ScalingMode::automatic).unit_ratio == 2.0);
    // 2 threads of a CPU rank beside a GPU rank: 3 units
    const ef::WorkerMix mixed = ef::worker_mix({"0\tvm\tgpu 0: test\t1\t0\tauto, free\t0", "1\tvm\tcpu, 2 threads\t2\t1-2\tauto, free\t-"});
    CHECK(mixed.units() == 3);
}

TEST_CASE("different work: another setting than placement and output, replicas only when asked", "[scaling]") {
    const std::string a = "[fit]\nreplicas = 40\nmax_iterations = 1000\n[run]\nthreads = 1\n[output]\nfile = a.h5\n";
    const std::string b = "[fit]\nreplicas = 80\nmax_iterations = 1000\n[run]\nthreads = 4\n[output]\nfile = b.h5\n";
    const std::string c = "[fit]\nreplicas = 40\nmax_iterations = 10\n[run]\nthreads = 1\n[output]\nfile = a.h5\n";
    CHECK(ef::work_difference(a, b, false).empty());
    CHECK(ef::work_difference(a, b, true) == "fit.replicas = 40 here, 80 in the file");
    CHECK(ef::work_difference(a, c, false) == "fit.max_iterations = 1000 here, 10 in the file");
    CHECK(ef::work_difference(a, a, true).empty());
}
