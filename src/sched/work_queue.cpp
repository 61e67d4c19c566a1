// SPDX-License-Identifier: MIT
#include <ensemblefit/sched/work_queue.hpp>

#include <algorithm>
#include <cmath>

#include <ensemblefit/core/error.hpp>

namespace ef {

namespace {

std::int64_t rounded(double items) { return static_cast<std::int64_t>(std::llround(items)); }

}  // namespace

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
      throughput_(static_cast<size_t>(ranks_), 0.0), last_(static_cast<size_t>(ranks_), 0) {
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

std::int64_t WorkQueue::min_unit(size_t rank) const {
    // Units last at least kMinUnitSeconds once a rank's speed is known: cheap fits (microseconds
    // each) would otherwise spend their time on the request round trip.
    const double by_time = throughput_[rank] * kMinUnitSeconds;
    return std::max(chunk_[rank], static_cast<std::int64_t>(by_time));
}

double WorkQueue::time_left(std::int64_t left) const {
    double rate = 0.0;
    for (double t : throughput_) {
        if (t <= 0.0) return 0.0;
        rate += t;
    }
    return static_cast<double>(left) / rate;
}

/// The unit size of the shared-cursor policies, before clipping to `left` (the rules are in
/// the header's comment).
std::int64_t WorkQueue::shared_unit(size_t rank, std::int64_t left) const {
    const double rate = throughput_[rank];
    const std::int64_t floor = min_unit(rank);
    const double t = time_left(left);
    if (policy_ == SchedPolicy::dynamic) {
        const std::int64_t by_time = static_cast<std::int64_t>(rate * kDynamicUnitSeconds);
        // Speeds not all known yet: never more than left / 2P, so the last units still spread.
        if (t <= 0.0) return std::max(chunk_[rank], std::min(by_time, left / (2 * ranks_)));
        // Then never more than a quarter of the time left at the recorded rates.
        return std::max(floor, std::min(by_time, static_cast<std::int64_t>(rate * t / 4.0)));
    }
    if (t <= 0.0) return floor;  // some rank's speed is still unknown: probe-sized units
    const double share = rate * t;
    // Never more than half the rank's share committed, counting the unit it may still hold.
    const std::int64_t committed_cap = rounded(share / 2.0 - static_cast<double>(last_[rank]));
    if (policy_ == SchedPolicy::guided) {
        const std::int64_t classic = (left + 2 * ranks_ - 1) / (2 * ranks_);
        return std::max(floor, std::min(classic, committed_cap));
    }
    // weighted: the chunk sized only the probe units; from here a unit's length is what counts.
    const std::int64_t by_time = std::max<std::int64_t>(1, static_cast<std::int64_t>(rate * kMinUnitSeconds));
    return sized_for_worker(rank, std::max(by_time, std::min(rounded(share / 4.0), committed_cap)), left);
}

/// weighted beside batch ranks (the header's rules): a batch rank never below its chunk; any
/// other rank nothing it would still compute once the batch ranks had finished all that is left.
std::int64_t WorkQueue::sized_for_worker(size_t rank, std::int64_t unit, std::int64_t left) const {
    const std::int64_t smallest = *std::min_element(chunk_.begin(), chunk_.end());
    const auto batch = [&](size_t r) { return chunk_[r] >= kBatchChunkRatio * smallest; };
    // Its whole share of the time left, when that is less: the run's last units still end together.
    if (batch(rank)) return std::max(unit, std::min(chunk_[rank], rounded(throughput_[rank] * time_left(left))));
    double batch_rate = 0.0;
    for (size_t r = 0; r < chunk_.size(); ++r)
        if (batch(r)) batch_rate += throughput_[r];
    if (batch_rate <= 0.0) return unit;  // no batch ranks
    const double batch_end = static_cast<double>(left) / batch_rate;
    return std::min(unit, static_cast<std::int64_t>(throughput_[rank] * batch_end));  // 0: this rank is done
}

UnitSpan WorkQueue::next(int rank, double throughput) {
    const size_t R = static_cast<size_t>(rank);
    if (throughput > 0.0) throughput_[R] = throughput;
    if (policy_ == SchedPolicy::static_blocks) {
        const std::int64_t b = block_cursor_[R];
        const std::int64_t e = std::min(b + min_unit(R), block_end_[R]);
        block_cursor_[R] = e;
        return {b, e};
    }
    const std::int64_t left = total_ - cursor_;
    if (left <= 0) return {cursor_, cursor_};
    const std::int64_t size = std::min(shared_unit(R, left), left);
    const UnitSpan u{cursor_, cursor_ + size};
    cursor_ += size;
    last_[R] = size;
    return u;
}

}  // namespace ef
