// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

#include <ensemblefit/sched/phase_timer.hpp>
#include <ensemblefit/sched/work_queue.hpp>

namespace {

/// Drains a queue with ranks asking in round-robin; returns how many units each rank got and
/// checks that every position is handed out exactly once.
std::vector<std::int64_t> drain(ef::WorkQueue& q, int ranks, std::int64_t total,
                                const std::vector<double>& speed, std::vector<std::int64_t>* sizes = nullptr) {
    std::vector<int> seen(static_cast<size_t>(total), 0);
    std::vector<std::int64_t> work(static_cast<size_t>(ranks), 0);
    std::vector<bool> done(static_cast<size_t>(ranks), false);
    int finished = 0;
    while (finished < ranks) {
        for (int r = 0; r < ranks; ++r) {
            if (done[static_cast<size_t>(r)]) continue;
            const ef::UnitSpan u = q.next(r, speed[static_cast<size_t>(r)]);
            if (u.empty()) {
                done[static_cast<size_t>(r)] = true;
                ++finished;
                continue;
            }
            if (sizes) sizes->push_back(u.size());
            work[static_cast<size_t>(r)] += u.size();
            for (auto i = u.begin; i < u.end; ++i) ++seen[static_cast<size_t>(i)];
        }
    }
    for (int s : seen) REQUIRE(s == 1);
    return work;
}

}  // namespace

TEST_CASE("every policy hands out each pending replica exactly once", "[sched]") {
    for (auto p : {ef::SchedPolicy::static_blocks, ef::SchedPolicy::dynamic, ef::SchedPolicy::guided,
                   ef::SchedPolicy::weighted}) {
        for (std::int64_t total : {0, 1, 7, 1000}) {
            ef::WorkQueue q(p, total, 3, 4);
            const auto work = drain(q, 3, total, {1.0, 2.0, 3.0});
            CHECK(work[0] + work[1] + work[2] == total);
            CHECK(q.remaining() == 0);
        }
    }
}

TEST_CASE("static gives contiguous equal blocks; guided shrinks; dynamic is fixed", "[sched]") {
    ef::WorkQueue st(ef::SchedPolicy::static_blocks, 10, 3, 2);
    CHECK(st.next(1, 0).begin == 3);  // rank 1's block is [3, 6)
    CHECK(st.next(1, 0).begin == 5);
    CHECK(st.next(1, 0).empty());

    std::vector<std::int64_t> sizes;
    ef::WorkQueue gd(ef::SchedPolicy::guided, 1000, 4, 5);
    drain(gd, 4, 1000, {0, 0, 0, 0}, &sizes);
    CHECK(sizes.front() == 125);  // 1000 / (2 x 4)
    CHECK(sizes.back() <= 5);
    for (size_t i = 1; i < sizes.size(); ++i) CHECK(sizes[i] <= sizes[i - 1]);

    sizes.clear();
    ef::WorkQueue dy(ef::SchedPolicy::dynamic, 100, 4, 8);
    drain(dy, 4, 100, {0, 0, 0, 0}, &sizes);
    for (size_t i = 0; i + 1 < sizes.size(); ++i) CHECK(sizes[i] == 8);
}

TEST_CASE("dynamic and static grow units of cheap fits to 20 ms of work", "[sched]") {
    ef::WorkQueue dy(ef::SchedPolicy::dynamic, 100000, 4, 4);
    CHECK(dy.next(1, 0.0).size() == 4);          // speed unknown: the chunk size
    CHECK(dy.next(1, 50000.0).size() == 1000);   // 50000 fits/s x 20 ms
    CHECK(dy.next(2, 1e9).size() <= 100000 / 8);  // capped at guided's size

    ef::WorkQueue st(ef::SchedPolicy::static_blocks, 1000, 2, 4);
    CHECK(st.next(0, 10000.0).size() == 200);  // 10000 fits/s x 20 ms, within rank 0's block
}

TEST_CASE("weighted units are proportional to measured throughput", "[sched]") {
    ef::WorkQueue q(ef::SchedPolicy::weighted, 10000, 2, 4);
    CHECK(q.next(0, 0.0).size() == 4);  // nothing measured yet: the chunk size

    q.next(1, 100.0);
    q.next(0, 400.0);
    ef::WorkQueue same = q;  // both ranks measured; compare their next units from one state

    const auto fast = q.next(0, 400.0);
    const auto slow = same.next(1, 100.0);

    CHECK(static_cast<double>(fast.size()) / static_cast<double>(slow.size()) == Approx(4.0).epsilon(0.01));
    CHECK(fast.size() == Approx(0.25 * 0.8 * static_cast<double>(q.remaining() + fast.size())).epsilon(0.01));
}

TEST_CASE("PhaseTimer::move shifts measured time between phases and keeps the sum", "[sched]") {
    ef::PhaseTimer t;
    t.enter(ef::Phase::compute);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    t.move(ef::Phase::compute, ef::Phase::comm, 0.005);
    const double compute = t.seconds(ef::Phase::compute);
    CHECK(t.seconds(ef::Phase::comm) == 0.005);
    CHECK(compute >= 0.015 - 1e-9);
    // never more than the source holds, never negative
    t.move(ef::Phase::sync, ef::Phase::comm, 1.0);
    CHECK(t.seconds(ef::Phase::sync) == 0.0);
    CHECK(t.seconds(ef::Phase::comm) == 0.005);
    t.move(ef::Phase::compute, ef::Phase::sched, -1.0);
    CHECK(t.seconds(ef::Phase::sched) == 0.0);
    t.move(ef::Phase::compute, ef::Phase::sched, 100.0);
    CHECK(t.seconds(ef::Phase::compute) == 0.0);
    t.stop();
    double sum = 0;
    for (double s : t.all()) sum += s;
    CHECK(sum == Approx(t.wall()).epsilon(1e-12));
}
