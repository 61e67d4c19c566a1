// SPDX-License-Identifier: MIT
#include "src/io/replica_writer.hpp"

#include <algorithm>
#include <limits>
#include <utility>

#include "src/core/thread_name.hpp"

namespace ef {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

ReplicaBlock gather_sorted(std::vector<ReplicaBlock>& blocks) {
    ReplicaBlock out;
    if (blocks.empty()) return out;
    struct Row {
        std::int64_t index;
        std::size_t block, row;
    };
    std::vector<Row> rows;
    for (std::size_t k = 0; k < blocks.size(); ++k)
        for (std::size_t i = 0; i < blocks[k].size(); ++i) rows.push_back({blocks[k].index[i], k, i});
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.index < b.index; });
    const int P = blocks.front().P;
    const std::size_t p = static_cast<std::size_t>(P);
    out.resize(rows.size(), P);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const ReplicaBlock& b = blocks[rows[i].block];
        const std::size_t r = rows[i].row;
        out.index[i] = b.index[r];
        std::copy_n(&b.params[r * p], p, &out.params[i * p]);
        // A receipt of rows written in place carries chi2 and iterations only for the central fit.
        if (!b.chi2.empty()) out.chi2[i] = b.chi2[r];
        out.status[i] = b.status[r];
        if (!b.iterations.empty()) out.iterations[i] = b.iterations[r];
        if (b.index[r] == 0) out.covariance = b.covariance;
    }
    return out;
}

std::size_t ReplicaWriter::buffer_rows_for(std::size_t chunk_rows, std::size_t P) {
    const std::size_t c = std::max<std::size_t>(chunk_rows, 1);
    const std::size_t rows = (std::size_t{4} << 20) / (8 * (P + 3));  // params, chi2, status, iterations
    return std::max<std::size_t>(1, (rows + c - 1) / c) * c;
}

namespace {

/// Rank 0's result file as a sink: each block's values through HDF5, then its status.
class ResultsFileSink final : public RowSink {
   public:
    explicit ResultsFileSink(ResultsFile& file) : file_(file) {}
    void write_values(const ReplicaBlock& b) override { file_.write_values(b, false); }
    void flush() override { file_.flush(); }
    void write_status(ReplicaBlock& b) override { file_.write_status(b, false); }
    void status_flush() override { file_.flush(); }

   private:
    ResultsFile& file_;
};

}  // namespace

ReplicaWriter::ReplicaWriter(ResultsFile& file, const Options& options)
    : own_sink_(std::make_unique<ResultsFileSink>(file)), sink_(*own_sink_), opt_(options) {
    start(file.identity().param_names.size());
}

ReplicaWriter::ReplicaWriter(RowSink& sink, std::size_t P, const Options& options) : sink_(sink), opt_(options) {
    start(P);
}

void ReplicaWriter::start(std::size_t P) {
    opt_.buffer_rows = std::max<std::size_t>(opt_.buffer_rows, 1);
    if (opt_.backlog_rows == 0) opt_.backlog_rows = (std::size_t{256} << 20) / row_bytes(P);
    opt_.backlog_rows = std::max(opt_.backlog_rows, 2 * opt_.buffer_rows);
    thread_ = std::thread([this] {
        name_this_thread("ef-writer");
        loop();
    });
}

ReplicaWriter::~ReplicaWriter() { finish_quietly(); }

bool ReplicaWriter::due(Clock::time_point now) const {
    return closing_ || filling_rows_ >= opt_.buffer_rows ||
           std::chrono::duration<double>(now - oldest_).count() >= opt_.max_delay;
}

void ReplicaWriter::add(ReplicaBlock&& block) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (error_) std::rethrow_exception(error_);
    if (filling_rows_ >= opt_.backlog_rows) {  // the writer is far behind: wait for it
        const auto t0 = Clock::now();
        done_.wait(lock, [&] { return filling_rows_ < opt_.backlog_rows || error_; });
        stats_.wait_seconds += seconds_since(t0);
        if (error_) std::rethrow_exception(error_);
    }
    const bool first = filling_.empty();
    if (first) oldest_ = Clock::now();
    filling_rows_ += block.size();
    filling_.push_back(std::move(block));
    if (first || filling_rows_ >= opt_.buffer_rows) wake_.notify_one();
}

bool ReplicaWriter::ready() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_ || filling_rows_ + writing_rows_ < opt_.backlog_rows;
}

void ReplicaWriter::loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        if (filling_.empty()) {
            if (closing_) return;
            wake_.wait(lock);
            continue;
        }
        if (!due(Clock::now())) {
            wake_.wait_until(lock, oldest_ + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(opt_.max_delay)));
            continue;
        }
        std::vector<ReplicaBlock> buffer;
        buffer.swap(filling_);
        writing_rows_ = std::exchange(filling_rows_, 0);
        done_.notify_all();
        if (!error_) {  // after a failed write nothing more is written (the run is ending)
            lock.unlock();
            std::exception_ptr failed;
            try {
                write_buffer(buffer);
            } catch (...) {
                failed = std::current_exception();
            }
            lock.lock();
            if (failed) error_ = failed;
        }
        writing_rows_ = 0;
        done_.notify_all();
    }
}

namespace {

/// Blocks whose rows ascend each, with no block's rows among another's (units of contiguous
/// replicas, as a run without --resume hands out): sorted by their first row, they are the
/// buffer's rows in replica order as they are, with no row to move.
bool ordered_blocks(std::vector<ReplicaBlock>& blocks) {
    for (const ReplicaBlock& b : blocks) {
        if (b.size() == 0) return false;
        for (std::size_t i = 1; i < b.size(); ++i)
            if (b.index[i] <= b.index[i - 1]) return false;
    }
    std::sort(blocks.begin(), blocks.end(),
              [](const ReplicaBlock& a, const ReplicaBlock& b) { return a.index.front() < b.index.front(); });
    for (std::size_t k = 1; k < blocks.size(); ++k)
        if (blocks[k].index.front() <= blocks[k - 1].index.back()) return false;
    return true;
}

/// Rows of a block worth a write of their own (~2 MiB of values and more): smaller blocks are
/// joined with their neighbours first, so the file gets few large hyperslabs.
constexpr std::size_t kOwnWriteRows = 32768;

/// The buffer as the blocks to write, in replica order: large ordered blocks as they are (no
/// copy), runs of small ones joined; any other buffer as one sorted block (gather_sorted).
std::vector<ReplicaBlock> blocks_to_write(std::vector<ReplicaBlock>& buffer) {
    std::vector<ReplicaBlock> out;
    if (!ordered_blocks(buffer)) {
        out.push_back(gather_sorted(buffer));
        return out;
    }
    std::vector<ReplicaBlock> small;
    auto join_small = [&] {
        if (small.size() == 1) out.push_back(std::move(small.front()));
        else if (!small.empty()) out.push_back(gather_sorted(small));
        small.clear();
    };
    for (ReplicaBlock& b : buffer) {
        if (b.size() >= kOwnWriteRows) {
            join_small();
            out.push_back(std::move(b));
        } else {
            small.push_back(std::move(b));
        }
    }
    join_small();
    return out;
}

}  // namespace

void ReplicaWriter::write_buffer(std::vector<ReplicaBlock>& buffer) {
    std::vector<ReplicaBlock> blocks = opt_.as_received ? std::move(buffer) : blocks_to_write(buffer);
    buffer.clear();
    auto t0 = Clock::now();
    std::size_t rows = 0;
    for (const ReplicaBlock& b : blocks) {
        keep(b);
        sink_.write_values(b);
        rows += b.size();
    }
    sink_.flush();  // every value of the buffer on disk before any of its status rows
    double busy = seconds_since(t0);
    if (opt_.debug_pause > 0) std::this_thread::sleep_for(std::chrono::duration<double>(opt_.debug_pause));
    t0 = Clock::now();
    for (ReplicaBlock& b : blocks) sink_.write_status(b);
    sink_.status_flush();
    busy += seconds_since(t0);
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.write_seconds += busy;
    stats_.writes += 1;
    stats_.rows += static_cast<std::int64_t>(rows);
}

// The first call fills the whole array (page faults and all) here, beside the fit, not after it.
void ReplicaWriter::keep(const ReplicaBlock& b) {
    if (opt_.kept_rows == 0 || b.size() == 0) return;
    const std::size_t P = static_cast<std::size_t>(b.P);
    if (kept_.status.empty()) {
        kept_.P = b.P;
        kept_.params.assign(opt_.kept_rows * P, std::numeric_limits<double>::quiet_NaN());
        kept_.status.assign(opt_.kept_rows, -1);
    }
    const auto end = opt_.kept_begin + static_cast<std::int64_t>(opt_.kept_rows);
    for (std::size_t i = 0; i < b.size(); ++i) {
        if (b.index[i] < opt_.kept_begin || b.index[i] >= end) continue;
        const auto row = static_cast<std::size_t>(b.index[i] - opt_.kept_begin);
        std::copy_n(&b.params[i * P], P, &kept_.params[row * P]);
        kept_.status[row] = b.status[i];
    }
}

ReplicaBlock ReplicaWriter::take_kept_rows() {
    ReplicaBlock out = std::move(kept_);
    kept_ = ReplicaBlock{};
    return out;
}

void ReplicaWriter::finish() {
    if (finished_) return;
    const auto t0 = Clock::now();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        closing_ = true;
        wake_.notify_one();
    }
    thread_.join();
    finished_ = true;
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.wait_seconds += seconds_since(t0);
    if (error_) std::rethrow_exception(error_);
}

void ReplicaWriter::finish_quietly() noexcept {
    if (finished_) return;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        closing_ = true;
        wake_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
    finished_ = true;
}

ReplicaWriter::Stats ReplicaWriter::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
}

}  // namespace ef
