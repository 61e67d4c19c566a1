// SPDX-License-Identifier: MIT
#include "src/io/results_file.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include <ensemblefit/core/config.hpp>
#include <ensemblefit/core/error.hpp>

namespace ef {

ReplicaSpan shard_span(std::int64_t R, const ShardSpec& s) {
    ReplicaSpan span;
    span.begin = 1 + R * s.index / s.count;
    span.end = 1 + R * (s.index + 1) / s.count;
    span.central = s.index == 0;
    return span;
}

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

void write_identity(h5::File& f, const RunIdentity& id) {
    f.set_attr("/", "ensemblefit_version", std::string(EF_VERSION " (" EF_GIT_DESCRIBE ")"));
    f.set_attr("/", "build_options",
               std::string("build=" EF_BUILD_TYPE "; compiler=" EF_CXX_COMPILER "; cuda=") +
                   (EF_HAVE_CUDA ? "on (" EF_CUDA_ARCHITECTURES ")" : "off"));
    f.set_attr("/", "config", id.resolved_config);
    f.set_attr("/", "canonical_config", id.canonical_config);
    f.set_attr("/", "data_checksum", id.data_checksum);
    f.set_attr("/", "model", id.model);
    f.set_attr("/", "param_names", id.param_names);
    f.set_attr("/", "replicas_total", id.replicas_total);
    f.set_attr("/", "shard_index", static_cast<std::int64_t>(id.shard.index));
    f.set_attr("/", "shard_count", static_cast<std::int64_t>(id.shard.count));
    f.set_attr("/", "range_begin", id.span.begin);
    f.set_attr("/", "range_end", id.span.end);
    f.set_attr("/", "has_central", static_cast<std::int64_t>(id.span.central ? 1 : 0));
    // Written only for plugins, so that the other models' files are as they were.
    if (!id.plugin_sha256.empty()) {
        f.set_attr("/", "plugin_name", id.plugin_name);
        f.set_attr("/", "plugin_abi", id.plugin_abi);
        f.set_attr("/", "plugin_sha256", id.plugin_sha256);
        f.set_attr("/", "plugin_path", id.plugin_path);
    }
}

RunIdentity read_identity(const h5::File& f) {
    RunIdentity id;
    if (!f.has_attr("/", "canonical_config"))
        throw usage_error(f.path() + ": not an ensemblefit result file (no canonical_config attribute)");
    id.canonical_config = f.attr_string("/", "canonical_config");
    id.resolved_config = f.attr_string("/", "config");
    id.data_checksum = f.attr_string("/", "data_checksum");
    id.model = f.attr_string("/", "model");
    id.param_names = f.attr_strings("/", "param_names");
    id.replicas_total = f.attr_int64("/", "replicas_total");
    id.shard.index = static_cast<int>(f.attr_int64("/", "shard_index"));
    id.shard.count = static_cast<int>(f.attr_int64("/", "shard_count"));
    id.span.begin = f.attr_int64("/", "range_begin");
    id.span.end = f.attr_int64("/", "range_end");
    id.span.central = f.attr_int64("/", "has_central") != 0;
    id.errors = read_central_errors(f);
    if (f.has_attr("/", "plugin_sha256")) {
        id.plugin_name = f.attr_string("/", "plugin_name");
        id.plugin_abi = f.attr_int64("/", "plugin_abi");
        id.plugin_sha256 = f.attr_string("/", "plugin_sha256");
        id.plugin_path = f.attr_string("/", "plugin_path");
    }
    return id;
}

}  // namespace

std::uint64_t replica_chunk_rows(std::uint64_t replicas, std::uint64_t P) {
    // About 1 MiB of /replicas/params per chunk (fewer chunks to index, whole-chunk writes), but
    // at least 32 chunks over the run, so a kill leaves little of a chunk half-written and a
    // small run's file stays small; never below 256 rows (the chunk index's size), nor more
    // rows than the run has.
    const std::uint64_t by_bytes = std::max<std::uint64_t>(1, (std::uint64_t{1} << 20) / (8 * std::max<std::uint64_t>(P, 1)));
    const std::uint64_t by_count = std::max<std::uint64_t>(256, (replicas + 31) / 32);
    return std::max<std::uint64_t>(1, std::min({by_bytes, by_count, replicas}));
}

namespace {

/**
 * Room on disk for `bytes` of `path` (just created), or data_error naming it: over the file size
 * limit (ulimit -f), or no space left. The space is reserved (fallocate, the file's size
 * unchanged), so a disk that fills during the run cannot take it: a new file is renamed over a
 * previous result only once it has room for every row (the rows are written after the rename,
 * and a run that then fails would have destroyed the previous result).
 */
void reserve_room(const std::string& path, std::uint64_t bytes) {
    const auto megabytes = [](std::uint64_t b) { return std::to_string((b + (1u << 20) - 1) >> 20) + " MB"; };
    rlimit limit{};
    if (getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY && bytes > limit.rlim_cur)
        throw data_error(path + ": " + std::strerror(EFBIG) + ": its rows need " + megabytes(bytes) +
                         ", over the file size limit of " + megabytes(limit.rlim_cur) + " (ulimit -f)");
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;  // the writes will say what is wrong
    const int rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
    close(fd);
    if (rc == ENOSPC || rc == EFBIG || rc == EDQUOT)
        throw data_error(path + ": " + std::strerror(rc) + ": its rows need " + megabytes(bytes));
    // Other answers (a file system without fallocate) reserve nothing; the writes still check.
}

}  // namespace

ResultsFile ResultsFile::create(const std::string& path, const RunIdentity& id, h5::RowStorage storage) {
    h5::File f = h5::File::create(path);
    const std::uint64_t P = id.param_names.size();
    const std::uint64_t M = static_cast<std::uint64_t>(std::max<std::int64_t>(id.span.size(), 0));
    // /replicas: params (P), chi2, status, iterations and index, 8 bytes each, and their chunk
    // index; /central and the summary are small.
    reserve_room(path, M * (P + 4) * 8 + (std::uint64_t{1} << 20));
    write_identity(f, id);
    if (id.span.central) {
        f.create_double("/central/params", P, 0, kNaN);
        f.create_double("/central/chi2", 1, 0, kNaN);
        f.create_int64("/central/status", 1, 0, -1);
        f.create_int64("/central/iterations", 1, 0, 0);
        f.create_double("/central/covariance", P, P, kNaN);
        prepare_central_errors(f, id.errors, static_cast<int>(P));
        f.set_attr("/central/params", "param_names", id.param_names);
    }
    // /replicas: the full shape from the start (every reader sees R rows; rows not yet written
    // read as the fill value, status -1), storage allocated chunk by chunk as results arrive,
    // and rows can be added later (--resume with more replicas grows the ensemble). The index
    // is written with each row's values, not here: at 1e8 replicas writing it up front was
    // 800 MB and 3.7 s of every rank's set-up (they wait for the file); a row not yet done
    // reads index 0 until it is.
    const std::uint64_t chunk = replica_chunk_rows(M, P);
    f.create_rows_int64("/replicas/index", M, 0, 0, chunk);
    // The rows every rank may write in place (params, chi2, iterations): storage reserved at once,
    // never filled (a row not yet done reads 0 there: status is the record of what is done).
    f.create_rows_double("/replicas/params", M, P, kNaN, chunk, storage);
    f.set_attr("/replicas/params", "param_names", id.param_names);
    f.create_rows_double("/replicas/chi2", M, 0, kNaN, chunk, storage);
    f.create_rows_int64("/replicas/status", M, 0, -1, chunk);
    f.set_attr("/replicas/status", "meaning",
               std::string("-1 not done, 0 converged, 1 max_iterations, 2 failed"));
    f.create_rows_int64("/replicas/iterations", M, 0, 0, chunk, storage);
    f.flush();
    return ResultsFile(std::move(f), id);
}

std::string plugin_difference(const RunIdentity& a, const std::string& a_is, const RunIdentity& b,
                              const std::string& b_is) {
    if (a.plugin_sha256 == b.plugin_sha256 && a.plugin_name == b.plugin_name && a.plugin_abi == b.plugin_abi)
        return "";
    auto one = [](const RunIdentity& id) {
        if (id.plugin_sha256.empty()) return std::string("none recorded");
        return id.plugin_sha256 + " (" + id.plugin_name + ", ABI " + std::to_string(id.plugin_abi) + ")";
    };
    return "the model plugin differs: SHA-256 " + one(a) + " " + a_is + ", " + one(b) + " " + b_is;
}

std::map<std::string, std::string> config_keys(const std::string& text) {
    std::map<std::string, std::string> keys;
    std::istringstream in(text);
    std::string line, section;
    while (std::getline(in, line)) {
        if (line.rfind("# ", 0) == 0) line.erase(0, 2);  // [data] commondata's sets and cuts
        if (line.size() > 1 && line.front() == '[' && line.back() == ']') {
            section = line.substr(1, line.size() - 2);
            continue;
        }
        const auto eq = line.find(" = ");
        if (eq != std::string::npos) keys[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
    }
    return keys;
}

/// Every key whose value differs between the file's config and this run's, with both values.
std::vector<std::string> config_differences(const std::string& file_text, const std::string& run_text) {
    const auto a = config_keys(file_text), b = config_keys(run_text);
    std::vector<std::string> out;
    auto value = [](const std::map<std::string, std::string>& m, const std::string& k) {
        const auto it = m.find(k);
        return it == m.end() ? std::string("(not set)") : it->second;
    };
    std::map<std::string, int> all;
    for (const auto& [k, v] : a) all[k] = 1;
    for (const auto& [k, v] : b) all[k] = 1;
    for (const auto& [k, one] : all)
        if (value(a, k) != value(b, k)) out.push_back(k + " = " + value(b, k) + " here, " + value(a, k) + " in the file");
    return out;
}

namespace {

/// Checks that `id` may finish the file whose identity is `old`; returns whether it grows it
/// (only fit.replicas larger, unsharded: replicas R+1..R' are added).
bool check_resumable(const std::string& path, const RunIdentity& old, const RunIdentity& id) {
    std::vector<std::string> diff = config_differences(old.canonical_config, id.canonical_config);
    const bool grows = diff.size() == 1 && diff[0].rfind("fit.replicas = ", 0) == 0 &&
                       id.replicas_total > old.replicas_total && id.shard.count == 1 && old.shard.count == 1;
    if (!diff.empty() && !grows) {
        std::string list;
        for (const auto& d : diff) list += (list.empty() ? "" : "; ") + d;
        if (diff.size() == 1 && diff[0].rfind("fit.replicas = ", 0) == 0)
            list += " (an ensemble grows only: more replicas, one shard)";
        throw usage_error(path + ": --resume: the file was written with a different config: " + list);
    }
    if (old.data_checksum != id.data_checksum)
        throw usage_error(path + ": --resume: the data changed since the file was written");
    if (const std::string d = plugin_difference(id, "here (" + id.plugin_path + ")", old, "in the file"); !d.empty())
        throw usage_error(path + ": --resume: " + d + "; the ensemble would mix two models");
    if (!grows && (old.span.begin != id.span.begin || old.span.end != id.span.end ||
                   old.span.central != id.span.central))
        throw usage_error(path + ": --resume: the file holds shard " + std::to_string(old.shard.index) +
                          "/" + std::to_string(old.shard.count) + ", not " +
                          std::to_string(id.shard.index) + "/" + std::to_string(id.shard.count));
    return grows;
}

/// Grows /replicas to the rows of `id` (the new rows: status -1, not done).
void grow_replicas(h5::File& f, const RunIdentity& id) {
    for (const char* name : {"/replicas/index", "/replicas/params", "/replicas/chi2", "/replicas/status",
                             "/replicas/iterations"})
        if (!f.extensible(name))
            throw usage_error(f.path() + ": --resume: this file's replicas cannot grow (written by an ensemblefit "
                                         "before ensembles could grow); start a new output");
    // The new rows' index is written with their values, as at creation.
    const std::uint64_t rows = static_cast<std::uint64_t>(id.span.size());
    for (const char* name : {"/replicas/index", "/replicas/params", "/replicas/chi2", "/replicas/status",
                             "/replicas/iterations"})
        f.extend_rows(name, rows);
    write_identity(f, id);
    f.flush();
}

/// The summary is complete once its last attribute is written (write_summary writes it last;
/// resume() removes the summary of a file it finishes).
bool summary_written(const h5::File& f) { return f.has_attr("/summary", "replicas_used"); }

/// A dataset `name` of class `cls` (8-byte elements) and shape `dims`, else data_error naming
/// the file and the dataset.
void check_dataset(const h5::File& f, const std::string& name, H5T_class_t cls, std::vector<std::uint64_t> dims) {
    if (!f.exists(name)) throw data_error(f.path() + ": dataset " + name + " is missing");
    if (!f.has_type(name, cls, 8))
        throw data_error(f.path() + ": dataset " + name + " is not of type " +
                         (cls == H5T_FLOAT ? "float64" : "int64"));
    const std::vector<std::uint64_t> shape = f.shape(name);
    if (shape != dims) {
        auto text = [](const std::vector<std::uint64_t>& d) {
            std::string t;
            for (auto v : d) t += (t.empty() ? "" : " x ") + std::to_string(v);
            return t.empty() ? std::string("a scalar") : t;
        };
        throw data_error(f.path() + ": dataset " + name + " has shape " + text(shape) + ", expected " + text(dims));
    }
}

/**
 * Checks that a result file's datasets are what its identity says (merge and --resume read
 * them by these sizes): the shard's range is the one shard_span gives, every dataset is there
 * with its type and shape. data_error (exit 3) naming the file and the dataset otherwise.
 */
void check_layout(const h5::File& f, const RunIdentity& id) {
    const std::uint64_t P = id.param_names.size();
    const auto& s = id.shard;
    if (P == 0) throw data_error(f.path() + ": attribute param_names is empty");
    if (s.count < 1 || s.index < 0 || s.index >= s.count || id.replicas_total < 0 ||
        id.replicas_total > std::numeric_limits<std::int64_t>::max() / s.count)
        throw data_error(f.path() + ": attributes shard_index, shard_count, replicas_total are inconsistent");
    const ReplicaSpan span = shard_span(id.replicas_total, s);
    if (span.begin != id.span.begin || span.end != id.span.end || span.central != id.span.central)
        throw data_error(f.path() + ": attributes range_begin, range_end, has_central do not match shard " +
                         std::to_string(s.index) + "/" + std::to_string(s.count) + " of " +
                         std::to_string(id.replicas_total) + " replicas");
    if (id.span.central) {
        check_dataset(f, "/central/params", H5T_FLOAT, {P});
        check_dataset(f, "/central/chi2", H5T_FLOAT, {1});
        check_dataset(f, "/central/status", H5T_INTEGER, {1});
        check_dataset(f, "/central/iterations", H5T_INTEGER, {1});
        check_dataset(f, "/central/covariance", H5T_FLOAT, {P, P});
        if (f.exists("/central/covariance_unscaled"))
            check_dataset(f, "/central/covariance_unscaled", H5T_FLOAT, {P, P});
    }
    const std::uint64_t M = static_cast<std::uint64_t>(id.span.size());
    check_dataset(f, "/replicas/index", H5T_INTEGER, {M});
    check_dataset(f, "/replicas/params", H5T_FLOAT, {M, P});
    check_dataset(f, "/replicas/chi2", H5T_FLOAT, {M});
    check_dataset(f, "/replicas/status", H5T_INTEGER, {M});
    check_dataset(f, "/replicas/iterations", H5T_INTEGER, {M});
}

/// The values merge relies on: replica numbers in order from the range's start (a row not yet
/// done, status -1, may still read the fill value 0: its index is written with its values),
/// statuses -1..2.
void check_values(const std::string& path, const ResultsContent& c) {
    for (size_t i = 0; i < c.replicas.index.size(); ++i)
        if (c.replicas.index[i] != c.id.span.begin + static_cast<std::int64_t>(i) &&
            !(c.replicas.index[i] == 0 && i < c.replicas.status.size() && c.replicas.status[i] == -1))
            throw data_error(path + ": dataset /replicas/index: row " + std::to_string(i + 1) + " holds replica " +
                             std::to_string(c.replicas.index[i]) + ", expected " +
                             std::to_string(c.id.span.begin + static_cast<std::int64_t>(i)));
    auto check_status = [&](const std::vector<std::int64_t>& status, const char* name) {
        for (size_t i = 0; i < status.size(); ++i)
            if (status[i] < -1 || status[i] > 2)
                throw data_error(path + ": dataset " + name + ": row " + std::to_string(i + 1) + " has status " +
                                 std::to_string(status[i]) + " (allowed: -1 not done, 0, 1, 2)");
    };
    check_status(c.replicas.status, "/replicas/status");
    check_status(c.central.status, "/central/status");
}

}  // namespace

bool ResultsFile::complete_for(const std::string& path, const RunIdentity& id) {
    h5::File f = h5::File::open_read(path);
    const RunIdentity old = read_identity(f);
    if (check_resumable(path, old, id)) return false;
    check_layout(f, old);
    return summary_written(f) && ResultsFile(std::move(f), old).pending().empty();
}

ResultsFile ResultsFile::resume(const std::string& path, const RunIdentity& id) {
    h5::File f = h5::File::open_write(path);
    const RunIdentity old = read_identity(f);
    const bool grows = check_resumable(path, old, id);
    check_layout(f, old);
    // The summary (if any) is of fewer replicas, or was being written when the run stopped:
    // gone until this run writes it, so a kill from here on leaves a file --resume finishes.
    if (f.exists("/summary")) EF_H5_CHECK(H5Ldelete(f.id(), "/summary", H5P_DEFAULT), path + ": removing /summary");
    if (grows) grow_replicas(f, id);
    f.set_attr("/", "config", id.resolved_config);
    f.flush();
    return ResultsFile(std::move(f), id);
}

ReplicaRuns ResultsFile::pending() const {
    ReplicaRuns out;
    if (id_.span.central && file_.read_int64("/central/status")[0] < 0) out.add(0);
    const auto status = file_.read_int64("/replicas/status");
    for (size_t i = 0; i < status.size(); ++i)
        if (status[i] < 0) out.add(id_.span.begin + static_cast<std::int64_t>(i));
    return out;
}

ReplicaRuns ResultsFile::all_replicas(const RunIdentity& id) {
    ReplicaRuns out;
    if (id.span.central) out.add(0);
    out.add(id.span.begin, id.span.end);
    return out;
}

/// The /replicas datasets, open for the run's row writes (ResultsFile::write).
struct ResultsFile::Rows {
    h5::Dataset index, params, chi2, status, iterations;
};

ResultsFile::ResultsFile(h5::File f, RunIdentity id) : file_(std::move(f)), id_(std::move(id)) {}
ResultsFile::ResultsFile(ResultsFile&&) noexcept = default;
ResultsFile& ResultsFile::operator=(ResultsFile&&) noexcept = default;
ResultsFile::~ResultsFile() = default;

void ResultsFile::close() {
    rows_.reset();  // datasets first: the file closes only once nothing in it is open
    file_.close();
}

ResultsFile::Rows& ResultsFile::rows() {
    if (!rows_) {
        // A chunk cache per dataset of a few chunks of the widest row, so a chunk written in
        // pieces (a block boundary inside it) stays in memory until it is whole.
        const auto dims = file_.shape("/replicas/params");
        const std::size_t P = dims.size() == 2 ? static_cast<std::size_t>(dims[1]) : 1;
        const std::size_t cache = std::max<std::size_t>(std::size_t{4} << 20, 4 * 8 * P * replica_chunk_rows(
                                                                                   static_cast<std::uint64_t>(id_.span.size()), P));
        rows_ = std::make_unique<Rows>(Rows{file_.open_dataset("/replicas/index", cache),
                                            file_.open_dataset("/replicas/params", cache),
                                            file_.open_dataset("/replicas/chi2", cache),
                                            file_.open_dataset("/replicas/status", cache),
                                            file_.open_dataset("/replicas/iterations", cache)});
    }
    return *rows_;
}

void ResultsFile::write_central(const ReplicaBlock& b, std::size_t i) {
    const std::uint64_t P = static_cast<std::uint64_t>(b.P);
    file_.write_rows("/central/params", 0, P, &b.params[i * P]);
    file_.write_rows("/central/chi2", 0, 1, &b.chi2[i]);
    file_.write_rows("/central/iterations", 0, 1, &b.iterations[i]);
    write_central_errors(file_, id_.errors, b.chi2[i], b.covariance, b.P);
}

namespace {

/// A block's rows as contiguous runs [i, j) of replica numbers >= 1, and the row of replica 0
/// (b.size() when it holds none).
struct RowRuns {
    std::vector<std::pair<size_t, size_t>> runs;
    size_t central = 0;
};

RowRuns row_runs(const ReplicaBlock& b) {
    RowRuns rr;
    rr.central = b.size();
    for (size_t i = 0; i < b.size();) {
        if (b.index[i] == 0) {
            rr.central = i++;
            continue;
        }
        size_t j = i + 1;
        while (j < b.size() && b.index[j] == b.index[j - 1] + 1) ++j;
        rr.runs.emplace_back(i, j);
        i = j;
    }
    return rr;
}

}  // namespace

void ResultsFile::write(const ReplicaBlock& b) {
    write_values(b);
    write_status(b);
}

// Each contiguous run of rows is one hyperslab per dataset. Status last: every value of the
// block is flushed to disk before any of its status rows, so a row only counts as done once its
// values are on disk (a kill in between leaves those rows at -1, fitted again by --resume).
void ResultsFile::write_values(const ReplicaBlock& b, bool flush) {
    const size_t P = static_cast<size_t>(b.P);
    const RowRuns rr = row_runs(b);
    if (rr.central < b.size()) write_central(b, rr.central);
    for (const auto& [i, j] : rr.runs) {
        const auto row = static_cast<std::uint64_t>(b.index[i] - id_.span.begin);
        rows().index.write_rows(row, j - i, &b.index[i]);
        if (rows_in_place_) continue;  // on disk already, written by the rank that fitted them
        rows().params.write_rows(row, j - i, &b.params[i * P]);
        rows().chi2.write_rows(row, j - i, &b.chi2[i]);
        rows().iterations.write_rows(row, j - i, &b.iterations[i]);
    }
    if (flush) file_.flush();
}

void ResultsFile::write_status(const ReplicaBlock& b, bool flush) {
    const RowRuns rr = row_runs(b);
    if (rr.central < b.size()) file_.write_rows("/central/status", 0, 1, &b.status[rr.central]);
    for (const auto& [i, j] : rr.runs)
        rows().status.write_rows(static_cast<std::uint64_t>(b.index[i] - id_.span.begin), j - i, &b.status[i]);
    if (flush) file_.flush();
}

ReplicaBlock ResultsFile::read_replicas() const {
    ReplicaBlock b;
    b.P = static_cast<int>(id_.param_names.size());
    b.index = file_.read_int64("/replicas/index");
    b.params = file_.read_double("/replicas/params");
    b.chi2 = file_.read_double("/replicas/chi2");
    b.status = file_.read_int64("/replicas/status");
    b.iterations = file_.read_int64("/replicas/iterations");
    return b;
}

void ResultsFile::write_summary(const EnsembleSummary& s) {
    const std::uint64_t P = static_cast<std::uint64_t>(s.P);
    for (const char* name :
         {"/summary/mean", "/summary/std", "/summary/covariance", "/summary/correlation", "/summary/quantiles"})
        if (file_.exists(name)) H5Ldelete(file_.id(), name, H5P_DEFAULT);
    file_.write("/summary/mean", s.mean);
    file_.write("/summary/std", s.std);
    file_.write("/summary/covariance", s.covariance, P);
    // NaN where a variance is 0 (correlation_of).
    file_.write("/summary/correlation", s.correlation.empty() ? correlation_of(s.covariance, s.P) : s.correlation, P);
    file_.write("/summary/quantiles", s.quantiles, P);
    file_.set_attr("/summary/quantiles", "levels_percent",
                   std::vector<double>(std::begin(kQuantileLevels), std::end(kQuantileLevels)));
    file_.set_attr("/summary", "replicas_total", s.total);
    file_.set_attr("/summary", "param_names", id_.param_names);
    file_.flush();
    file_.set_attr("/summary", "replicas_used", s.used);  // last: marks the summary complete
    file_.flush();
}

RunIdentity read_run_identity(const h5::File& f) { return read_identity(f); }

void check_results_layout(const h5::File& f, const RunIdentity& id) {
    check_layout(f, id);
    const std::uint64_t P = id.param_names.size();
    if (id.span.central && f.exists("/central/correlation"))
        check_dataset(f, "/central/correlation", H5T_FLOAT, {P, P});
}

void check_results_values(const h5::File& f, const RunIdentity& id, const ReplicaBlock& replicas) {
    ResultsContent c;
    c.id = id;
    c.replicas.index = replicas.index;
    c.replicas.status = replicas.status;
    if (id.span.central) c.central.status = f.read_int64("/central/status");
    check_values(f.path(), c);
}

ResultsContent read_results(const std::string& path) {
    const h5::File f = h5::File::open_read(path);
    ResultsContent c;
    c.id = read_identity(f);
    check_layout(f, c.id);
    const int P = static_cast<int>(c.id.param_names.size());
    if (c.id.span.central) {
        c.central.P = P;
        c.central.index = {0};
        c.central.params = f.read_double("/central/params");
        c.central.chi2 = f.read_double("/central/chi2");
        c.central.status = f.read_int64("/central/status");
        c.central.iterations = f.read_int64("/central/iterations");
        c.central.covariance = read_central_covariance_unscaled(f);
    }
    c.replicas.P = P;
    c.replicas.index = f.read_int64("/replicas/index");
    c.replicas.params = f.read_double("/replicas/params");
    c.replicas.chi2 = f.read_double("/replicas/chi2");
    c.replicas.status = f.read_int64("/replicas/status");
    c.replicas.iterations = f.read_int64("/replicas/iterations");
    check_values(path, c);
    return c;
}

}  // namespace ef
