// SPDX-License-Identifier: MIT
#include <ensemblefit/sched/work_queue.hpp>

#include <algorithm>
#include <cmath>

#include <ensemblefit/core/error.hpp>

namespace ef {

SchedPolicy parse_sched_policy(const std::string& name) {
    if (name == "static") return SchedPolicy::static_blocks;
    if (name == "dynamic") return SchedPolicy::dynamic;
    if (name == "guided") return SchedPolicy::guided;
    if (name == "weighted") return SchedPolicy::weighted;
    throw usage_error("sched.policy: unknown policy '" + name + "' (allowed: static, dynamic, guided, weighted)");
}

const char* to_string(SchedPolicy p) {
    switch (p) {
        case SchedPolicy::static_blocks: return "static";
        case SchedPolicy::dynamic: return "dynamic";
        case SchedPolicy::guided: return "guided";
        case SchedPolicy::weighted: return "weighted";
    }
    return "?";
}

WorkQueue::WorkQueue(SchedPolicy policy, std::int64_t total, int ranks, std::int64_t chunk)
    : WorkQueue(policy, total, std::vector<std::int64_t>(static_cast<size_t>(std::max(1, ranks)), chunk)) {}

WorkQueue::WorkQueue(SchedPolicy policy, std::int64_t total, const std::vector<std::int64_t>& chunks)
    : policy_(policy), total_(total), ranks_(std::max<int>(1, static_cast<int>(chunks.size()))),
      chunk_(chunks), block_cursor_(static_cast<size_t>(ranks_)), block_end_(static_cast<size_t>(ranks_)),
      throughput_(static_cast<size_t>(ranks_), 0.0) {
    chunk_.resize(static_cast<size_t>(ranks_), 1);
    for (auto& c : chunk_) c = std::max<std::int64_t>(1, c);
    for (int r = 0; r < ranks_; ++r) {
        block_cursor_[static_cast<size_t>(r)] = total_ * r / ranks_;
        block_end_[static_cast<size_t>(r)] = total_ * (r + 1) / ranks_;
    }
}

std::int64_t WorkQueue::remaining() const {
    if (policy_ != SchedPolicy::static_blocks) return total_ - cursor_;
    std::int64_t left = 0;
    for (int r = 0; r < ranks_; ++r)
        left += block_end_[static_cast<size_t>(r)] - block_cursor_[static_cast<size_t>(r)];
    return left;
}

UnitSpan WorkQueue::next(int rank, double throughput) {
    const size_t R = static_cast<size_t>(rank);
    if (throughput > 0.0) throughput_[R] = throughput;
    // Units last at least kMinUnitSeconds once a rank's speed is known: cheap fits (microseconds
    // each) would otherwise spend their time on the request round trip.
    const std::int64_t by_time =
        throughput_[R] > 0.0 ? static_cast<std::int64_t>(throughput_[R] * kMinUnitSeconds) : 0;
    if (policy_ == SchedPolicy::static_blocks) {
        const std::int64_t b = block_cursor_[R];
        const std::int64_t e = std::min(b + std::max(chunk_[R], by_time), block_end_[R]);
        block_cursor_[R] = e;
        return {b, e};
    }
    const std::int64_t left = total_ - cursor_;
    if (left <= 0) return {cursor_, cursor_};
    std::int64_t size = chunk_[R];
    if (policy_ == SchedPolicy::dynamic) {
        // Never more than guided would give, so the last units still spread over the ranks.
        size = std::max(chunk_[R], std::min(by_time, left / (2 * ranks_)));
    } else if (policy_ == SchedPolicy::guided) {
        size = std::max(chunk_[R], (left + 2 * ranks_ - 1) / (2 * ranks_));
    } else if (policy_ == SchedPolicy::weighted) {
        if (throughput_[R] > 0.0) {
            // Ranks not measured yet count as the mean of the measured ones.
            double sum = 0.0;
            int known = 0;
            for (double t : throughput_) {
                if (t > 0) {
                    sum += t;
                    ++known;
                }
            }
            const double total_rate = sum + (ranks_ - known) * (sum / known);
            const double time_left = static_cast<double>(left) / total_rate;
            size = std::max<std::int64_t>(1, std::llround(throughput_[R] * time_left / 4.0));
        }
    }
    size = std::min(size, left);
    const UnitSpan u{cursor_, cursor_ + size};
    cursor_ += size;
    return u;
}

}  // namespace ef
