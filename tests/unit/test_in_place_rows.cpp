// SPDX-License-Identifier: MIT
// Rows written in place (src/io/in_place_rows.*, docs/parallel-output.md): a file made with
// h5::RowStorage::in_place has every chunk's offset; values pwritten there are what HDF5 reads
// back, across chunk ends and for replicas out of order; rows never written read 0; a file made
// for rank 0's writes has no table.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "src/io/h5.hpp"
#include "src/io/in_place_rows.hpp"
#include "src/io/results_file.hpp"
#include "result_identity.hpp"
#include "temp_dir.hpp"

using ef_test::TempDir;

namespace {

/// Replicas `numbers`, values derived from each number.
ef::ReplicaBlock rows(const std::vector<std::int64_t>& numbers, int P) {
    ef::ReplicaBlock b;
    b.resize(numbers.size(), P);
    for (size_t i = 0; i < numbers.size(); ++i) {
        const double r = static_cast<double>(numbers[i]);
        b.index[i] = numbers[i];
        for (int q = 0; q < P; ++q) b.params[i * static_cast<size_t>(P) + static_cast<size_t>(q)] = r / 3.0 + q;
        b.chi2[i] = r / 7.0;
        b.status[i] = numbers[i] % 3;
        b.iterations[i] = 10 + numbers[i] % 5;
    }
    return b;
}

std::vector<std::int64_t> span(std::int64_t begin, std::int64_t end) {
    std::vector<std::int64_t> v;
    for (std::int64_t r = begin; r < end; ++r) v.push_back(r);
    return v;
}

}  // namespace

TEST_CASE("rows written at the chunks' offsets are what HDF5 reads back", "[in_place]") {
    TempDir dir;
    const std::string path = dir.file("rows.h5");
    const int P = 3;
    ef::ResultsFile::create(path, ef_test::result_identity(1000, P), ef::h5::RowStorage::in_place).close();
    const ef::RowTable table = ef::read_row_table(ef::h5::File::open_read(path), 1, P);
    REQUIRE(table.chunk_rows == 256);  // 4 chunks of 256 rows, the last one partly past the end
    REQUIRE(table.params.size() == 4);
    const std::vector<std::vector<std::int64_t>> units = {
        {0, 1, 2, 3},          // the central fit (not written here: /central is rank 0's) and rows 1-3
        span(200, 600),        // across two chunk ends
        {900, 700, 702, 703},  // out of order, with gaps (a resumed run's units)
        span(990, 1001),       // the last rows
    };

    {
        ef::InPlaceRows sink(path, table);
        for (const auto& u : units) sink.write_values(rows(u, P));
        sink.flush();
        for (const auto& u : units) {
            ef::ReplicaBlock b = rows(u, P);
            sink.write_status(b);
        }
        const std::vector<ef::ReplicaBlock> receipts = sink.take_receipts();
        REQUIRE(receipts.size() == units.size());
        CHECK(receipts[0].chi2.size() == 4);  // holds the central fit: whole
        CHECK(receipts[1].chi2.empty());      // else index, params and status only
        CHECK(receipts[1].iterations.empty());
        CHECK(receipts[1].params.size() == 400 * P);
        CHECK(sink.take_receipts().empty());
    }

    const ef::h5::File f = ef::h5::File::open_read(path);
    const std::vector<double> params = f.read_double("/replicas/params");
    const std::vector<double> chi2 = f.read_double("/replicas/chi2");
    const std::vector<std::int64_t> iterations = f.read_int64("/replicas/iterations");
    std::vector<bool> written(1001, false);
    for (const auto& u : units)
        for (std::int64_t r : u) written[static_cast<size_t>(r)] = r >= 1;
    const ef::ReplicaBlock all = rows(span(1, 1001), P);
    size_t wrong = 0, nonzero_unwritten = 0;
    for (size_t i = 0; i < 1000; ++i) {
        const bool w = written[i + 1];
        for (int q = 0; q < P; ++q) {
            const size_t k = i * P + static_cast<size_t>(q);
            const double want = w ? all.params[k] : 0.0;
            if (std::memcmp(&params[k], &want, 8) != 0) ++(w ? wrong : nonzero_unwritten);
        }
        const double c = w ? all.chi2[i] : 0.0;
        const std::int64_t it = w ? all.iterations[i] : 0;
        if (std::memcmp(&chi2[i], &c, 8) != 0 || iterations[i] != it) ++(w ? wrong : nonzero_unwritten);
    }
    CHECK(wrong == 0);
    CHECK(nonzero_unwritten == 0);  // rows not written read 0, not NaN: status is the record
}

TEST_CASE("a file made for rank 0's writes has no row table", "[in_place]") {
    TempDir dir;
    const std::string path = dir.file("rank0.h5");
    ef::ResultsFile::create(path, ef_test::result_identity(1000, 2)).close();

    const ef::RowTable table = ef::read_row_table(ef::h5::File::open_read(path), 1, 2);

    CHECK(table.empty());
}
