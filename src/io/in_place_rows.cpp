// SPDX-License-Identifier: MIT
#include "src/io/in_place_rows.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <random>
#include <utility>

#include <ensemblefit/core/error.hpp>

#include "src/io/h5.hpp"

namespace ef {

RowTable read_row_table(const h5::File& f, std::int64_t first, std::uint64_t P) {
    RowTable t;
    std::uint64_t c_params = 0, c_chi2 = 0, c_iterations = 0;
    t.params = f.chunk_addresses("/replicas/params", c_params);
    t.chi2 = f.chunk_addresses("/replicas/chi2", c_chi2);
    t.iterations = f.chunk_addresses("/replicas/iterations", c_iterations);
    const std::vector<std::uint64_t> shape = f.shape("/replicas/chi2");
    if (t.params.empty() || t.params.size() != t.chi2.size() || t.chi2.size() != t.iterations.size() ||
        c_params != c_chi2 || c_chi2 != c_iterations || shape.size() != 1)
        return RowTable{};
    t.first = first;
    t.rows = shape[0];
    t.chunk_rows = c_chi2;
    t.P = P;
    return t;
}

namespace {

/// The table as one array of numbers for MPI_Bcast: first, rows, chunk_rows, P, chunks, then
/// the three offset lists.
std::vector<std::uint64_t> pack_table(const RowTable& t) {
    std::vector<std::uint64_t> v{static_cast<std::uint64_t>(t.first), t.rows, t.chunk_rows, t.P, t.chi2.size()};
    for (const auto* list : {&t.params, &t.chi2, &t.iterations}) v.insert(v.end(), list->begin(), list->end());
    return v;
}

RowTable unpack_table(const std::vector<std::uint64_t>& v) {
    RowTable t;
    t.first = static_cast<std::int64_t>(v[0]);
    t.rows = v[1];
    t.chunk_rows = v[2];
    t.P = v[3];
    const auto n = static_cast<std::ptrdiff_t>(v[4]);
    const auto at = v.begin() + 5;
    t.params.assign(at, at + n);
    t.chi2.assign(at + n, at + 2 * n);
    t.iterations.assign(at + 2 * n, at + 3 * n);
    return t;
}

/// Why a rank cannot write the rows in place. `nfs`: the file is on NFS and the run spans
/// several nodes: NFS clients cache and write back pages on their own schedule, so rows written
/// on one node are not safely beside another node's writes in one file.
enum class Refusal : int { none, open, read, other_file, nfs };

/// This rank's answer to the token at `offset`, with the errno where there is one.
std::pair<Refusal, int> probe_token(const std::string& path, std::uint64_t offset, std::uint64_t token,
                                    bool several_nodes) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return {Refusal::open, errno};
    struct statfs fs {};
    if (several_nodes && ::fstatfs(fd, &fs) == 0 && fs.f_type == NFS_SUPER_MAGIC) {
        ::close(fd);
        return {Refusal::nfs, 0};
    }
    std::uint64_t seen = 0;
    const ssize_t n = ::pread(fd, &seen, sizeof seen, static_cast<off_t>(offset));
    const int err = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(sizeof seen)) return {Refusal::read, n < 0 ? err : 0};
    return {seen == token ? Refusal::none : Refusal::other_file, 0};
}

std::string refusal_text(const MpiContext& ctx, const std::string& path, int rank, Refusal why, int err) {
    const std::string who = ctx.is_root() ? ctx.describe(rank) : "rank " + std::to_string(rank);
    switch (why) {
        case Refusal::open: return who + " cannot open " + path + " for writing (" + std::strerror(err) + ")";
        case Refusal::read:
            return who + " cannot read " + path + (err ? std::string(" (") + std::strerror(err) + ")" : "");
        case Refusal::nfs:
            return who + ": " + path + " is on NFS, which does not keep rows written from several nodes consistent";
        default: return who + " sees another file at " + path + " than rank 0 (no shared file system there?)";
    }
}

/// Writes the 8-byte `value` at `offset` of `path` and syncs it; 0 when done, else the errno.
int put_word(const std::string& path, std::uint64_t offset, std::uint64_t value) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno != 0 ? errno : EIO;
    int err = 0;
    if (::pwrite(fd, &value, sizeof value, static_cast<off_t>(offset)) != static_cast<ssize_t>(sizeof value) ||
        ::fdatasync(fd) != 0)
        err = errno != 0 ? errno : EIO;
    ::close(fd);
    return err;
}

}  // namespace

RowTable share_row_table(const MpiContext& ctx, const std::string& root_path, RowTable table,
                         std::int64_t probe_replica, std::string& why) {
    why.clear();
    const std::string path = ctx.broadcast(root_path);  // a new file's temporary name is rank 0's
    std::uint64_t token = 0, offset = 0;
    std::vector<std::uint64_t> packed;
    int made_for_it = 1;
    std::pair<Refusal, int> root_failed{Refusal::none, 0};  // rank 0 could not write the token
    if (ctx.is_root()) {
        made_for_it = table.empty() ? 0 : 1;
        if (probe_replica < table.first || table.empty()) table = RowTable{};  // nothing to write in place
        packed = pack_table(table);
        if (!table.empty()) {
            token = std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32) | 1;
            offset = table.offset(table.chi2, static_cast<std::uint64_t>(probe_replica - table.first), 1);
            if (const int err = put_word(path, offset, token)) root_failed = {Refusal::open, err};
        }
    }
    std::uint64_t head[4] = {packed.size(), token, offset, static_cast<std::uint64_t>(made_for_it)};
    EF_MPI_CHECK(MPI_Bcast(head, 4, MPI_UINT64_T, 0, ctx.world()));
    packed.resize(head[0]);
    EF_MPI_CHECK(MPI_Bcast(packed.data(), static_cast<int>(head[0]), MPI_UINT64_T, 0, ctx.world()));
    table = unpack_table(packed);
    if (head[3] == 0) why = "its /replicas were made for rows written by rank 0 (created with in_place = off)";
    if (table.empty()) return table;
    const auto [code, err] =
        root_failed.first != Refusal::none ? root_failed : probe_token(path, head[2], head[1], ctx.nodes() > 1);
    const int mine[2] = {static_cast<int>(code), err};
    std::vector<int> all(2 * static_cast<std::size_t>(ctx.size()));
    EF_MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, ctx.world()));
    if (ctx.is_root()) put_word(path, head[2], 0);  // rows not yet done read 0
    for (int r = 0; r < ctx.size(); ++r) {
        const auto c = static_cast<Refusal>(all[2 * static_cast<std::size_t>(r)]);
        if (c == Refusal::none) continue;
        why = refusal_text(ctx, path, r, c, all[2 * static_cast<std::size_t>(r) + 1]);
        return RowTable{};
    }
    return table;
}

InPlaceRows::InPlaceRows(const std::string& path, RowTable table) : path_(path), table_(std::move(table)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) throw data_error(path_ + ": cannot open it to write replica rows (" + std::strerror(errno) + ")");
}

InPlaceRows::~InPlaceRows() {
    if (fd_ >= 0) ::close(fd_);
}

void InPlaceRows::write_at(const void* data, std::size_t bytes, std::uint64_t offset) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
        const ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            throw data_error(path_ + ": writing replica rows: " + std::strerror(n < 0 ? errno : EIO));
        p += n;
        offset += static_cast<std::uint64_t>(n);
        bytes -= static_cast<std::size_t>(n);
        bytes_ += static_cast<std::uint64_t>(n);
    }
}

// Runs of consecutive replicas, cut at chunk boundaries: each piece is contiguous in each of the
// three datasets (an unfiltered chunk of c x P values is c whole rows one after the other).
void InPlaceRows::write_values(const ReplicaBlock& b) {
    const std::uint64_t P = table_.P, c = table_.chunk_rows;
    for (std::size_t i = 0; i < b.size();) {
        if (b.index[i] < table_.first) {  // the central fit: /central, rank 0's
            ++i;
            continue;
        }
        const auto row = static_cast<std::uint64_t>(b.index[i] - table_.first);
        if (row >= table_.rows)
            throw runtime_error(path_ + ": replica " + std::to_string(b.index[i]) + " is past the file's rows");
        std::size_t j = i + 1;
        const std::uint64_t chunk_end = (row / c + 1) * c;
        while (j < b.size() && b.index[j] == b.index[j - 1] + 1 && row + (j - i) < chunk_end) ++j;
        const std::size_t n = j - i;
        write_at(&b.params[i * P], n * P * 8, table_.offset(table_.params, row, P));
        write_at(&b.chi2[i], n * 8, table_.offset(table_.chi2, row, 1));
        write_at(&b.iterations[i], n * 8, table_.offset(table_.iterations, row, 1));
        i = j;
    }
}

void InPlaceRows::flush() {
    if (::fdatasync(fd_) != 0) throw data_error(path_ + ": writing replica rows to disk: " + std::strerror(errno));
}

void InPlaceRows::write_status(ReplicaBlock& b) {
    bool central = false;
    for (const std::int64_t r : b.index) central = central || r == 0;
    if (!central) {  // chi2 and iterations are on disk; rank 0 needs params (the summary) and status
        b.chi2 = {};
        b.iterations = {};
    }
    std::lock_guard<std::mutex> lock(mutex_);
    receipts_.push_back(std::move(b));
}

std::vector<ReplicaBlock> InPlaceRows::take_receipts() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(receipts_, {});
}

}  // namespace ef
