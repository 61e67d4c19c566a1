// SPDX-License-Identifier: MIT
// The dry run's bound lines (src/sched/dispatch_bound.*): demand against capacity, worked by
// hand on round figures.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "src/sched/dispatch_bound.hpp"

namespace {

// 10 us per unit (1e5 units/s), 1 us per written block, 1 GB/s.
ef::DispatchCapacity capacity() {
    ef::DispatchCapacity c;
    c.unit_seconds = 1e-5;
    c.writer_block_seconds = 1e-6;
    c.writer_bytes_per_second = 1e9;
    c.source = "by hand";
    return c;
}

// 1e6 replicas, units of 10, rows of 100 bytes, a fit 1 ms, the 20 ms floor.
ef::DispatchDemand demand(int ranks, double item_seconds) {
    ef::DispatchDemand d;
    d.ranks = ranks;
    d.items = 1000000;
    d.unit_items = 10;
    d.row_bytes = 100;
    d.item_seconds = item_seconds;
    d.min_unit_seconds = 0.02;
    d.item_seconds_source = "from base.h5";
    return d;
}

bool has(const std::string& line, const std::string& part) { return line.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("dispatch bound: writer rows per second are a block's cost shared by its rows plus the bytes", "[dispatch_bound]") {
    const ef::DispatchCapacity c = capacity();

    const double rows = c.writer_rows_per_second(20, 100);

    // 1 us / 20 rows + 100 B / 1 GB/s = 0.05 us + 0.1 us per row.
    REQUIRE(rows == Approx(1.0 / 1.5e-7));
}

TEST_CASE("dispatch bound: 1000 ranks of 1 ms fits keep up and 4000 saturate the dispatcher", "[dispatch_bound]") {
    const ef::DispatchCapacity c = capacity();

    const std::vector<std::string> ok = ef::dispatch_bound_lines(demand(1000, 1e-3), c);
    const std::vector<std::string> busy = ef::dispatch_bound_lines(demand(4000, 1e-3), c);

    REQUIRE(ok.size() == 2);
    // Units grow from 10 to 20 fits (20 ms); 1000 / 20 ms = 5e4 units/s against 1e5.
    CHECK(has(ok[0], "bound: dispatcher: 1000 ranks need 5e+04 units/s (units of 20 replicas, 20 ms each)"));
    CHECK(has(ok[0], "rank 0 answers 1e+05 units/s (10 us per unit): 50 % busy, keeps up (rank 0's figures: by hand)"));
    // 1e6 rows/s asked; 1 / (1 us / 20 + 0.1 us) = 6.67e6 rows/s: 15 %. The output: 1e6 rows in 150 ms.
    CHECK(has(ok[1], "bound: writer: 1000000 rows of 100 bytes = 100 MB through rank 0's writer at 6.67e+06 rows/s"));
    CHECK(has(ok[1], "at least 150 ms; 1000 ranks make 1e+06 rows/s (100 MB/s; a fit 1 ms per rank, from base.h5): 15 % busy, keeps up"));
    // 4000 / 20 ms = 2e5 units/s: twice what it answers; 1e5 x 20 ms = 2000 ranks keep it busy.
    CHECK(has(busy[0], "4000 ranks need 2e+05 units/s"));
    CHECK(has(busy[0], "200 % busy, SATURATED: ranks wait for units; 2000 ranks keep it busy"));
    CHECK(has(busy[1], "60 % busy, keeps up"));
}

TEST_CASE("dispatch bound: fast fits saturate the writer and an unknown fit time gives the threshold", "[dispatch_bound]") {
    const ef::DispatchCapacity c = capacity();

    // 100 us fits on 1,000 ranks: units grow to 200 fits; 1e7 rows/s against 1/(0.005 + 0.1) us.
    const std::vector<std::string> fast = ef::dispatch_bound_lines(demand(1000, 1e-4), c);
    const std::vector<std::string> unknown = ef::dispatch_bound_lines(demand(1000, -1), c);

    CHECK(has(fast[1], "1000 ranks make 1e+07 rows/s"));
    CHECK(has(fast[1], "105 % busy, SATURATED: results wait with their ranks, the fits take 100 ms but the output 105 ms"));
    // Unknown: at most 1000 / 20 ms units/s; units stay at 10 rows: 1 / (0.1 + 0.1) us = 5e6
    // rows/s, so a fit must take 1000 / 5e6 s = 200 us.
    CHECK(has(unknown[0], "1000 ranks need at most 5e+04 units/s (units of 10 replicas, at least 20 ms once speeds are known)"));
    CHECK(has(unknown[0], "at most 50 % busy, keeps up"));
    CHECK(has(unknown[1], "keeps up while a replica fit takes at least 200 us per rank (fit time unknown"));
}
