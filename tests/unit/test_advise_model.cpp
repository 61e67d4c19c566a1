// SPDX-License-Identifier: MIT
// The prediction behind `ensemblefit advise`: the throughput fit and the wall-time model, on
// numbers small enough to check by hand.
#include <catch2/catch.hpp>

#include <fstream>

#include <ensemblefit/core/error.hpp>

#include "src/run/advise_model.hpp"
#include "src/run/predicted_timing.hpp"
#include "temp_dir.hpp"

namespace {

using namespace ef::advise;

TEST_CASE("fit_linear recovers a line, clamps a negative intercept, resists an outlier", "[advise]") {
    const Linear l = fit_linear({1, 2, 4, 8}, {2 + 3 * 1.0, 2 + 3 * 2.0, 2 + 3 * 4.0, 2 + 3 * 8.0});
    CHECK(l.a == Approx(2.0));
    CHECK(l.b == Approx(3.0));

    const Linear neg = fit_linear({1, 2}, {0.5, 2.5});  // slope from the larger point, 1.25; a < 0 -> 0
    CHECK(neg.a == 0.0);
    CHECK(neg.b == Approx(1.25));

    // 1 ms per unit + 1 ms per item; one small unit 10x slow (a loaded machine) moves nothing.
    const Linear noisy = fit_linear({1, 2, 4, 8, 16, 32}, {0.002, 0.03, 0.005, 0.009, 0.017, 0.033});
    CHECK(noisy.b == Approx(0.001));
    CHECK(noisy.a == Approx(0.001));

    const Linear one = fit_linear({4}, {2});
    CHECK(one.a == 0.0);
    CHECK(one.b == Approx(0.5));

    const Linear flat = fit_linear({1, 1, 1}, {3, 5, 4});  // no spread in x: a constant
    CHECK(flat.at(1.0) == Approx(4.0));
}

ProblemModel fit_model() {
    ProblemModel m;
    m.items = 17;
    m.cores = 2;
    m.launch = 0.5;
    m.launch_per_rank = 0.1;
    m.io = Linear{0.2, 0.0};
    m.cpu.measured = true;
    m.cpu.unit = Linear{0.1, 1.0};
    m.cpu.fixed = 1.0;
    return m;
}

TEST_CASE("a fit's predicted wall time is start-up, whole rounds of units and output", "[advise]") {
    const ProblemModel m = fit_model();

    // One rank, 2 threads: units of clamp(17 / 8, 1, 8) = 2 fits, 1 per thread: 1.1 s each; 9 units.
    const Prediction one = predict(m, Placement{1, 2, 0, 0});
    // Two ranks, 1 thread: units of 1 fit (17 / 16), 1.1 s; 17 units in ceil(17 / 2) = 9 rounds.
    const Prediction two = predict(m, Placement{2, 1, 0, 0});

    CHECK(one.compute == Approx(9 * 1.1));
    CHECK(one.wall == Approx(0.5 + 1.0 + 0.2 + 9 * 1.1));
    CHECK(one.efficiency == Approx(9 * 1.1 / one.wall));
    CHECK(two.compute == Approx(9 * 1.1));
    CHECK(two.wall == Approx(0.5 + 0.1 + 1.0 + 0.2 + 9 * 1.1));
    CHECK(two.efficiency == Approx(17 * 1.1 / 2 / two.wall));
}

TEST_CASE("set-up built with a rank's threads is shared by its threads, not by ranks", "[advise]") {
    ProblemModel m = fit_model();
    m.cpu.fixed_threaded = 0.6;  // of the 1.0 s set-up on one thread

    const Prediction one = predict(m, Placement{1, 2, 0, 0});  // 0.4 + 0.6 / 2
    const Prediction two = predict(m, Placement{2, 1, 0, 0});  // every rank builds its own: 0.4 + 0.6

    CHECK(one.wall == Approx(0.5 + 0.7 + 0.2 + 9 * 1.1));
    CHECK(two.wall == Approx(0.5 + 0.1 + 1.0 + 0.2 + 9 * 1.1));
}

TEST_CASE("threads beyond the cores slow every unit down in proportion", "[advise]") {
    const ProblemModel m = fit_model();

    const Prediction over = predict(m, Placement{2, 2, 0, 0});  // 4 threads on 2 cores

    // Units of clamp(17 / 16, 1, 8) = 1 fit: 0.1 + 1 x 2 = 2.1 s; 17 units in 9 rounds.
    CHECK(over.compute == Approx(9 * 2.1));
    CHECK_THAT(over.bound, Catch::Contains("more threads than cores"));
}

TEST_CASE("ranks sharing a GPU overlap their fixed cost until the device is busy", "[advise]") {
    ProblemModel m;
    m.items = 4000;
    m.cores = 16;
    m.gpu.measured = true;
    m.gpu.unit = Linear{1.0, 0.001};  // 1 s per unit (launches, LM rounds) + 1 ms per fit on the device

    const double one = predict(m, Placement{0, 1, 1, 1}).compute;
    const double two = predict(m, Placement{0, 1, 1, 2}).compute;
    const double four = predict(m, Placement{0, 1, 1, 4}).compute;

    // Every rank gets two units (FitRun::unit_size). 1 rank: units of 2000 fits, 1 + 2 s each.
    // 2 ranks: units of 1000, 1 + 1 s alone, 2 x 1 s of shared device time: 2 s each. 4 ranks:
    // units of 500, max(1 + 0.5, 4 x 0.5) = 2 s: the device is the limit.
    CHECK(one == Approx(6.0));
    CHECK(two == Approx(4.0));
    CHECK(four == Approx(4.0));
}

TEST_CASE("a reconstruction's batches split by speed and pay the gradient sum between ranks", "[advise]") {
    ProblemModel m;
    m.recon = true;
    m.items = 100;
    m.batch = 25;
    m.iterations = 2;
    m.cores = 4;
    m.cpu.measured = true;
    m.cpu.unit = Linear{0.01, 0.002};
    m.allreduce_bytes = 4e6;
    m.launch_per_rank = 0.0;
    m.bandwidth = 4e9;

    const Prediction one = predict(m, Placement{1, 1, 0, 0});
    const Prediction four = predict(m, Placement{4, 1, 0, 0});

    // 8 batches: 0.01 + 25 x 0.002 = 0.06 s alone; on 4 ranks 0.01 + 0.0125 plus the sum,
    // 2 x 3/4 x 1 ms + 2 x 20 us.
    CHECK(one.wall == Approx(8 * 0.06));
    CHECK(four.wall == Approx(8 * (0.01 + 0.0125 + 1.5e-3 + 40e-6)));
}

TEST_CASE("the placements compared and the recommendation", "[advise]") {
    const std::vector<Placement> cpu_only = candidate_placements(2, 0, {1, 2, 4}, true, false);
    const std::vector<Placement> all = candidate_placements(16, 1, {1, 2, 4}, true, true);
    std::vector<Prediction> rows(4);
    rows[0].placement = Placement{0, 1, 1, 1};
    rows[0].wall = 10.0;
    rows[1].placement = Placement{2, 2, 0, 0};
    rows[1].wall = 10.25;  // within 3 %, no GPU
    rows[2].placement = Placement{4, 1, 0, 0};
    rows[2].wall = 10.2;  // within 3 %, no GPU, the same cores, one thread per rank: the pick
    rows[3].placement = Placement{1, 2, 0, 0};
    rows[3].wall = 11.0;  // fewer cores, but 10 % slower

    REQUIRE(cpu_only.size() == 2);
    CHECK(cpu_only[0].label() == "1 cpu x 2 threads");
    CHECK(cpu_only[1].label() == "2 cpu x 1 thread");
    CHECK(all.size() == 5 + 3 + 3);  // 1..16 CPU ranks; 1 GPU x 1, 2, 4; each beside CPU ranks
    CHECK(all.back().label() == "1 gpu x 4 ranks + 12 cpu x 1 thread");
    CHECK(recommend(rows) == 2);
    rows[2].wall = 10.4;  // no longer within 3 %
    CHECK(recommend(rows) == 1);
}

TEST_CASE("a prediction file round-trips and matches a run's placement", "[advise]") {
    ef_test::TempDir dir;
    std::vector<Prediction> rows(2);
    rows[0].placement = Placement{2, 1, 0, 0};
    rows[0].wall = 12.5;
    rows[0].efficiency = 0.9;
    rows[1].placement = Placement{0, 1, 1, 2};
    rows[1].wall = 3.25;
    const std::string path = dir.file("p.tsv");
    ef::write_prediction_file(path, "advise test", rows, 1);

    const std::vector<ef::PredictedRow> back = ef::read_prediction_file(path);
    const ef::advise::Placement run = ef::placement_of({"0\thost\tcpu, 1 threads\t1", "1\thost\tcpu, 1 threads\t1"});

    REQUIRE(back.size() == 2);
    CHECK(back[0].wall == Approx(12.5));
    CHECK(back[1].recommended);
    CHECK(run.cpu_ranks == 2);
    CHECK(run.threads == 1);
    REQUIRE(ef::match_prediction(back, run.cpu_ranks, run.gpu_ranks(), run.threads) == &back[0]);
    CHECK(ef::match_prediction(back, 0, 2, 1) == &back[1]);
    CHECK(ef::match_prediction(back, 4, 0, 1) == nullptr);
    std::ofstream(dir.file("bad.tsv")) << "# c\n2 cpu\t2\tx\n";
    CHECK_THROWS_AS(ef::read_prediction_file(dir.file("bad.tsv")), ef::Error);
}

}  // namespace
