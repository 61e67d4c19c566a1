// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/core/replica_block.hpp>

#include "src/io/replica_writer.hpp"

namespace ef {

/**
 * Where the rows of /replicas/params, chi2 and iterations lie in the result file: one file
 * offset per chunk and dataset (8 bytes each), read by rank 0 from the file's chunk index and
 * broadcast (share_row_table). Chunk k holds rows [k c, (k + 1) c), each row of native 8-byte
 * values, P of them for params, one for chi2 and iterations; row i is replica `first + i`.
 */
struct RowTable {
    std::int64_t first = 1;
    std::uint64_t rows = 0;
    std::uint64_t chunk_rows = 0;  ///< 0: no table (rows go through rank 0)
    std::uint64_t P = 0;
    std::vector<std::uint64_t> params, chi2, iterations;
    bool empty() const { return chunk_rows == 0; }
    /// The file offset of row `row`'s value in a dataset of `width` values per row.
    std::uint64_t offset(const std::vector<std::uint64_t>& chunks, std::uint64_t row, std::uint64_t width) const {
        return chunks[row / chunk_rows] + (row % chunk_rows) * width * 8;
    }
};

/// The table of an open result file whose /replicas were made with h5::RowStorage::in_place and
/// are flushed; empty when they were not (chunks not all allocated, another type or layout).
RowTable read_row_table(const h5::File& f, std::int64_t first, std::uint64_t P);

/**
 * Collective: whether every rank can write rows in place into rank 0's `root_path` (the other
 * ranks' argument is not used). Rank 0 passes the table and a replica
 * still to do (its chi2 row is the probe: status -1 there, so what it holds means nothing), or
 * an empty table. Rank 0 writes a random 8-byte token at the probe's chi2 and syncs it; every
 * rank opens the file for reading and writing and reads the token back there (a rank on a node
 * that sees another file, or none, at this path fails); rank 0 writes 0 back. Returns the table
 * on every rank when all agree, else an empty one, with `why` saying which rank failed and how
 * (the same text on every rank).
 */
RowTable share_row_table(const MpiContext& ctx, const std::string& root_path, RowTable table,
                         std::int64_t probe_replica, std::string& why);

/**
 * One rank's sink for a ReplicaWriter when rows are written in place: values pwrite()n at
 * their offsets (RowTable), fdatasync() as the flush, then each block's receipt (its index,
 * status and params, and chi2 and iterations only where it holds the central fit, replica 0)
 * kept for take_receipts(), to be sent to rank 0, which writes /replicas/index, /replicas/status
 * and /central through HDF5 (ResultsFile::set_rows_in_place). The central fit's values are not
 * written here: /central is rank 0's. Errors (EIO, a file gone read-only) are data_error naming
 * the file.
 */
class InPlaceRows final : public RowSink {
   public:
    InPlaceRows(const std::string& path, RowTable table);
    InPlaceRows(const InPlaceRows&) = delete;
    InPlaceRows& operator=(const InPlaceRows&) = delete;
    ~InPlaceRows() override;

    void write_values(const ReplicaBlock& block) override;
    void flush() override;
    void write_status(ReplicaBlock& block) override;
    void status_flush() override {}
    /// The receipts of the blocks whose rows are on disk, oldest first (any thread).
    std::vector<ReplicaBlock> take_receipts();
    std::uint64_t bytes_written() const { return bytes_; }

   private:
    void write_at(const void* data, std::size_t bytes, std::uint64_t offset);
    std::string path_;
    RowTable table_;
    int fd_ = -1;
    std::uint64_t bytes_ = 0;
    std::mutex mutex_;
    std::vector<ReplicaBlock> receipts_;  // guarded by mutex_
};

}  // namespace ef
