// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <ensemblefit/core/replica_block.hpp>

#include "src/io/results_file.hpp"

namespace ef {

/**
 * Where a ReplicaWriter puts a buffer's blocks, in this order: every block's values, flush()
 * (the values on disk), every block's status, status_flush(). Rank 0's ResultsFile is one (its
 * HDF5 datasets); InPlaceRows, every rank's rows written at their file offsets, another
 * (src/io/in_place_rows.hpp): its "status" is the receipt it hands to rank 0.
 */
class RowSink {
   public:
    virtual ~RowSink() = default;
    virtual void write_values(const ReplicaBlock& block) = 0;
    virtual void flush() = 0;
    /// After flush(): the block is done (it may be moved from).
    virtual void write_status(ReplicaBlock& block) = 0;
    virtual void status_flush() = 0;
};

/**
 * Rank 0's results writer: gathers finished work units into large blocks and writes them to
 * the ResultsFile from a thread of its own, so neither the fit nor the dispatcher thread (which
 * answers the other ranks' requests) waits for the disk. Where rows are written in place
 * (`[output] in_place`), every rank runs one more into its InPlaceRows sink (units as received,
 * `as_received`), and rank 0's writes only what the receipts carry (index, status, /central).
 *
 * Double buffering: add() appends to the filling buffer; the writer thread takes it whole when
 * it holds `buffer_rows` rows, when its oldest unit has waited `max_delay` seconds, or at
 * finish(), sorts its rows by replica number (units from several ranks arrive out of order) and
 * writes each contiguous run as one hyperslab: values, a flush, status, a flush
 * (ResultsFile::write_values, write_status). So a kill loses at most the units in the two
 * buffers (at most `max_delay` seconds of results plus the one being written), and --resume
 * needs no journal.
 *
 * Backlog: ready() says whether the rows waiting for the writer (filling and being written)
 * are under `backlog_rows`; rank 0's dispatcher hands blocks over only then, and otherwise
 * leaves the results with the ranks that sent them, so a slow disk never keeps it from
 * answering work requests. add() itself waits only when a caller ignores ready() and the
 * filling buffer alone reaches the backlog.
 *
 * Threads: while it runs, only this writer's thread calls HDF5 on the file; it never calls MPI
 * (the process stays at MPI_THREAD_SERIALIZED, MPI on the dispatcher thread).
 */
class ReplicaWriter {
   public:
    struct Options {
        std::size_t buffer_rows = 65536;  ///< rows gathered before a write
        double max_delay = 0.5;           ///< seconds a finished unit may wait in the buffer
        /// `--debug.slow-writes`: seconds the writer waits between a block's values and its
        /// status, so a test can kill the run in the middle of a write.
        double debug_pause = 0.0;
        /// Rows [kept_begin, kept_begin + kept_rows) of the replica numbers, when this run
        /// writes every one of them: their params and status are kept in memory as they are
        /// written (kept_rows()), so the summary after the last fit reads nothing back. 0: none.
        std::int64_t kept_begin = 1;
        std::size_t kept_rows = 0;
        /// Rows that may wait for the writer before ready() says no; 0: 256 MiB of rows (at
        /// least two buffers).
        std::size_t backlog_rows = 0;
        /// Blocks written as they came (no sort, no joining): a sink that hands each unit's
        /// receipt on (InPlaceRows), where a unit is what rank 0 counts.
        bool as_received = false;
    };
    struct Stats {
        double write_seconds = 0.0;  ///< the writer thread in HDF5 calls (beside the fit)
        double wait_seconds = 0.0;   ///< add() and finish() waiting for the writer
        std::int64_t writes = 0;     ///< blocks written
        std::int64_t rows = 0;       ///< replica rows written
    };

    ReplicaWriter(ResultsFile& file, const Options& options);
    /// Into any sink, for rows of `P` parameters.
    ReplicaWriter(RowSink& sink, std::size_t P, const Options& options);
    ReplicaWriter(const ReplicaWriter&) = delete;
    ReplicaWriter& operator=(const ReplicaWriter&) = delete;
    /// Stops the thread after writing what is buffered (errors are dropped: finish() reports them).
    ~ReplicaWriter();

    /// Hands a finished unit to the writer (any thread, one at a time); rethrows a failed write.
    void add(ReplicaBlock&& block);
    /// Whether add() would take a block now without waiting (or a write failed: add() throws).
    bool ready() const;
    /// Writes everything buffered and stops the thread; rethrows a failed write. Once only.
    void finish();
    /// For the abort path: writes what is buffered unless a write already failed; never throws.
    void finish_quietly() noexcept;
    Stats stats() const;
    /// After finish(): the kept rows' params and status, as /replicas holds them (rows never
    /// written: NaN and -1, the file's fill values); index, chi2 and iterations are left empty.
    /// Moves them out: once only.
    ReplicaBlock take_kept_rows();

    /// Rows per write for rows of `P` parameters: about 4 MiB, a whole number of chunks.
    static std::size_t buffer_rows_for(std::size_t chunk_rows, std::size_t P);
    /// Bytes one replica row of `P` parameters takes in /replicas: index, params, chi2, status,
    /// iterations, 8 bytes each.
    static std::size_t row_bytes(std::size_t P) { return 8 * (P + 4); }

   private:
    void start(std::size_t P);
    void loop();
    void write_buffer(std::vector<ReplicaBlock>& buffer);
    bool due(std::chrono::steady_clock::time_point now) const;
    void keep(const ReplicaBlock& block);

    std::unique_ptr<RowSink> own_sink_;  // the ResultsFile's, when made from one
    RowSink& sink_;
    Options opt_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;  // the writer: work is due, or closing
    std::condition_variable done_;  // add()/finish(): the writer took or wrote a buffer
    std::vector<ReplicaBlock> filling_;
    std::size_t filling_rows_ = 0;
    std::size_t writing_rows_ = 0;  // rows the writer thread holds now
    std::chrono::steady_clock::time_point oldest_;
    bool closing_ = false;
    bool finished_ = false;
    std::exception_ptr error_;
    Stats stats_;
    ReplicaBlock kept_;  // the writer thread's alone until finish(); allocated at its first write
    std::thread thread_;  // last: started once everything above exists
};

/// The rows of `blocks` as one block sorted by replica number (the central fit's covariance
/// kept).
ReplicaBlock gather_sorted(std::vector<ReplicaBlock>& blocks);

}  // namespace ef
