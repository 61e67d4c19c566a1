// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ensemblefit/core/replica_block.hpp>
#include <ensemblefit/core/ensemble_summary.hpp>

#include "src/io/central_errors.hpp"
#include "src/io/h5.hpp"
#include "src/io/replica_runs.hpp"

namespace ef {

/// Shard i of n (0-based): `--shard i/n`.
struct ShardSpec {
    int index = 0;
    int count = 1;
};

/// What one output file holds: replicas [begin, end) in /replicas, and /central if `central`.
struct ReplicaSpan {
    std::int64_t begin = 1;
    std::int64_t end = 1;
    bool central = true;
    std::int64_t size() const { return end - begin; }
};

/// Shard i of n holds a contiguous slice of 1..R (sizes differ by at most one); shard 0 also
/// holds replica 0.
ReplicaSpan shard_span(std::int64_t replicas, const ShardSpec& shard);

/// Identity of a run, stored as root attributes and checked by --resume and merge.
struct RunIdentity {
    std::string canonical_config;
    std::string resolved_config;
    std::string data_checksum;  ///< hex
    std::string model;
    std::vector<std::string> param_names;
    std::int64_t replicas_total = 0;
    ShardSpec shard;
    ReplicaSpan span;
    CentralErrors errors;  ///< how /central/covariance is stored ([fit] error_scale)
    /// A model plugin's identity (all empty/0 for the other models; root attributes
    /// plugin_name, plugin_abi, plugin_sha256, plugin_path): the library's code is part of
    /// the run, so --resume and merge refuse another library (docs/security.md).
    std::string plugin_name, plugin_sha256, plugin_path;
    std::int64_t plugin_abi = 0;
};

/// "" when `a` and `b` name the same plugin (or none), else a sentence naming both: "SHA-256 X
/// (name N, ABI 2) in `a_is`, Y (...) in `b_is`".
std::string plugin_difference(const RunIdentity& a, const std::string& a_is, const RunIdentity& b,
                              const std::string& b_is);

/// A stored config text (a file's canonical_config or config attribute) as "section.key" -> value
/// (sections "[param.a]" give "param.a.start"; [data] commondata's commented sets and cuts too).
std::map<std::string, std::string> config_keys(const std::string& text);

/// Every key ("section.key") whose value differs between two config texts ("key = value" lines
/// under "[section]"s, as a file's canonical_config), each as "key = RUN here, FILE in the file".
std::vector<std::string> config_differences(const std::string& file_text, const std::string& run_text);

/// Rows per chunk of the /replicas datasets of a file of `replicas` rows of `P` parameters.
std::uint64_t replica_chunk_rows(std::uint64_t replicas, std::uint64_t P);

/**
 * The HDF5 result file of a fit (layout in docs/architecture.md): the /replicas datasets have
 * their full shape from the start (rows not yet written read as status -1), are chunked with
 * storage allocated as rows arrive, and are written block by block (ReplicaWriter gathers
 * finished units into large blocks), values first, a flush, then the block's status and a
 * flush, so a killed run keeps every block written and --resume fits only the rows whose
 * status is still -1. Only rank 0 opens it.
 */
class ResultsFile {
   public:
    /// `storage`: h5::RowStorage::in_place makes /replicas/params, chi2 and iterations writable
    /// by every rank at fixed offsets (src/io/in_place_rows.hpp).
    static ResultsFile create(const std::string& path, const RunIdentity& id,
                              h5::RowStorage storage = h5::RowStorage::incremental);
    /// Opens an existing partial file, refusing one written by a different config (naming every
    /// differing key) or data. A config that differs only by a larger fit.replicas (unsharded)
    /// grows the file: replicas R+1..R' are added, not done.
    static ResultsFile resume(const std::string& path, const RunIdentity& id);
    /// Whether --resume of `path` would find nothing to do (checks as resume() does; read-only,
    /// so the file is left byte for byte as it is).
    static bool complete_for(const std::string& path, const RunIdentity& id);

    /// Replica numbers not yet done (0 first when the central fit is missing), read from the
    /// status rows.
    ReplicaRuns pending() const;
    /// Every replica of `id`: the pending list of a new file, without reading it back.
    static ReplicaRuns all_replicas(const RunIdentity& id);
    /// Writes a block's rows (any replica numbers of this file; contiguous runs as one
    /// hyperslab each): write_values(), then write_status().
    void write(const ReplicaBlock& block);
    /// Every value but the status, then a flush (unless `flush` is false: the caller flushes
    /// before any status row of the block is written).
    void write_values(const ReplicaBlock& block, bool flush = true);
    /// The status rows (after write_values() of the same block, flushed), then a flush (unless
    /// `flush` is false).
    void write_status(const ReplicaBlock& block, bool flush = true);
    /// From now on write_values() writes /replicas/index and /central only: the rows' params,
    /// chi2 and iterations were written in place by the ranks that fitted them, and the blocks
    /// handed here are their receipts (InPlaceRows).
    void set_rows_in_place(bool on) { rows_in_place_ = on; }
    /// Everything written so far to disk (H5Fflush).
    void flush() { file_.flush(); }
    /// /replicas arrays as stored now (rows in replica order).
    ReplicaBlock read_replicas() const;
    void write_summary(const EnsembleSummary& s);
    h5::File& file() { return file_; }
    const RunIdentity& identity() const { return id_; }
    void close();

    ResultsFile(ResultsFile&&) noexcept;
    ResultsFile& operator=(ResultsFile&&) noexcept;
    ~ResultsFile();

   private:
    struct Rows;
    ResultsFile(h5::File f, RunIdentity id);
    Rows& rows();
    void write_central(const ReplicaBlock& b, std::size_t i);
    h5::File file_;
    RunIdentity id_;
    std::unique_ptr<Rows> rows_;  // the /replicas datasets, opened by the first write
    bool rows_in_place_ = false;
};

/// A complete result file read back (for merge and tests).
struct ResultsContent {
    RunIdentity id;
    ReplicaBlock central;   ///< empty when the file holds no central fit; covariance unscaled
    ReplicaBlock replicas;
};

/// Reads and validates (layout and values, as merge needs them): data_error (exit 3) naming the
/// file and the dataset when a shape, a type, a replica number or a status code is not what the
/// file's identity says.
ResultsContent read_results(const std::string& path);
/// The checks of read_results() on an open file, before its datasets are read: every dataset's
/// type and shape from the identity (/central/correlation's too, where there is one).
void check_results_layout(const h5::File& f, const RunIdentity& id);
/// And after /replicas is read: replica numbers in order, status codes -1..2 (central's too).
void check_results_values(const h5::File& f, const RunIdentity& id, const ReplicaBlock& replicas);
/// The identity attributes of an open result file (usage_error when it is not one).
RunIdentity read_run_identity(const h5::File& f);

}  // namespace ef
