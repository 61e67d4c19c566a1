// SPDX-License-Identifier: MIT
// The results writer (src/io/replica_writer.*): /replicas storage allocated as rows arrive,
// units from several ranks gathered, sorted and written in large blocks, status last.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "src/io/replica_writer.hpp"
#include "src/io/results_file.hpp"
#include "result_identity.hpp"
#include "temp_dir.hpp"

using ef_test::TempDir;

namespace {

/// Replicas [first, first + count) with values derived from the replica number.
ef::ReplicaBlock unit(std::int64_t first, std::int64_t count, int P) {
    ef::ReplicaBlock b;
    b.resize(static_cast<size_t>(count), P);
    for (std::int64_t i = 0; i < count; ++i) {
        const auto r = static_cast<size_t>(i);
        b.index[r] = first + i;
        for (int q = 0; q < P; ++q) b.params[r * static_cast<size_t>(P) + static_cast<size_t>(q)] = 0.5 * static_cast<double>(first + i) + q;
        b.chi2[r] = static_cast<double>(first + i) / 7.0;
        b.status[r] = (first + i) % 3;
        b.iterations[r] = 10 + (first + i) % 5;
    }
    if (first == 0) b.covariance.assign(static_cast<size_t>(P * P), 1.0);
    return b;
}

}  // namespace

TEST_CASE("chunk rows follow the replica count", "[writer]") {
    CHECK(ef::replica_chunk_rows(90, 2) == 90);         // a small run: one chunk
    CHECK(ef::replica_chunk_rows(2560, 18) == 256);     // never below 256 rows
    CHECK(ef::replica_chunk_rows(1000000, 5) == 26214); // about 1 MiB of parameters
    CHECK(ef::replica_chunk_rows(100000, 5) == 3125);   // at least 32 chunks
    CHECK(ef::replica_chunk_rows(0, 5) == 1);
}

TEST_CASE("a million-replica file is not filled at creation; rows appear as they are written", "[writer]") {
    TempDir dir;
    const std::string path = dir.file("big.h5");
    const int P = 5;
    ef::ResultsFile f = ef::ResultsFile::create(path, ef_test::result_identity(1000000, P));
    f.close();
    // Before: every /replicas dataset allocated and filled, 1e6 x (5 + 4) x 8 bytes = 72 MB;
    // then the index alone (8 MB). Now nothing of /replicas until rows are written.
    CHECK(std::filesystem::file_size(path) < 1'000'000);

    ef::ResultsFile g = ef::ResultsFile::resume(path, ef_test::result_identity(1000000, P));
    {
        ef::ReplicaWriter::Options o;
        o.buffer_rows = 1500;
        ef::ReplicaWriter w(g, o);
        // Units of three ranks, out of order; replica 0 among them.
        w.add(unit(2001, 1000, P));
        w.add(unit(1, 1000, P));
        w.add(unit(0, 1, P));
        w.add(unit(1001, 1000, P));
        w.finish();
        CHECK(w.stats().rows == 3001);
        CHECK(w.stats().writes >= 1);
    }
    const ef::ReplicaBlock rows = g.read_replicas();
    g.close();

    CHECK(std::filesystem::file_size(path) < 12'000'000);
    REQUIRE(rows.size() == 1000000);
    const ef::ReplicaBlock want = unit(1, 3000, P);
    for (size_t i = 0; i < 3000; ++i) {
        CHECK(rows.index[i] == static_cast<std::int64_t>(i) + 1);
        CHECK(rows.status[i] == want.status[i]);
        CHECK(rows.chi2[i] == want.chi2[i]);
        CHECK(rows.iterations[i] == want.iterations[i]);
        CHECK(rows.params[i * P + 4] == want.params[i * P + 4]);
    }
    // Rows never written read as not done (status -1, NaN values, index 0: a row's replica
    // number is written with its values).
    CHECK(rows.status[3000] == -1);
    CHECK(rows.status[999999] == -1);
    CHECK(std::isnan(rows.params[3000 * P]));
    CHECK(rows.index[3000] == 0);
    CHECK(rows.index[999999] == 0);
    const ef::ResultsContent c = ef::read_results(path);
    CHECK(c.central.status[0] == 0);  // replica 0's own values
    CHECK(c.central.chi2[0] == 0.0);
}

TEST_CASE("gather_sorted merges units in replica order and keeps the central covariance", "[writer]") {
    std::vector<ef::ReplicaBlock> blocks;
    blocks.push_back(unit(5, 3, 2));
    blocks.push_back(unit(0, 2, 2));
    blocks.push_back(unit(2, 3, 2));

    const ef::ReplicaBlock b = ef::gather_sorted(blocks);

    REQUIRE(b.size() == 8);
    for (size_t i = 0; i < b.size(); ++i) CHECK(b.index[i] == static_cast<std::int64_t>(i));
    CHECK(b.params[2 * 7 + 1] == 0.5 * 7 + 1);
    CHECK(b.covariance.size() == 4);
}

TEST_CASE("ReplicaRuns: the pending replicas as runs, sliced by list position", "[writer][pending]") {
    ef::ReplicaRuns r;
    r.add(0);
    r.add(1, 4);   // joins the run of 0: [0, 4)
    r.add(7);
    r.add(9, 12);  // [0, 4) [7, 8) [9, 12): 8 replicas in 3 runs
    CHECK(r.size() == 8);
    REQUIRE(r.runs().size() == 3);
    CHECK(r.runs()[0] == ef::ReplicaRuns::Run{0, 4});
    CHECK(r.slice(0, 8) == std::vector<std::int64_t>{0, 1, 2, 3, 7, 9, 10, 11});
    CHECK(r.slice(3, 6) == std::vector<std::int64_t>{3, 7, 9});
    CHECK(r.slice(5, 5).empty());
    CHECK(r.slice(6, 100) == std::vector<std::int64_t>{10, 11});
    const ef::ReplicaRuns copy(r.runs());  // as another rank rebuilds it from the broadcast runs
    CHECK(copy.size() == 8);
    CHECK(copy.slice(2, 7) == r.slice(2, 7));

    // A new file's list is its span, without reading the file; a file's own list agrees.
    TempDir dir;
    const std::string path = dir.file("p.h5");
    const ef::RunIdentity id = ef_test::result_identity(5000, 3);
    ef::ResultsFile::create(path, id).close();
    const ef::ReplicaRuns all = ef::ResultsFile::all_replicas(id);
    CHECK(all.size() == 5001);
    CHECK(all.runs().size() == 1);
    const ef::ResultsFile f = ef::ResultsFile::resume(path, id);
    CHECK(f.pending().runs() == all.runs());
}
