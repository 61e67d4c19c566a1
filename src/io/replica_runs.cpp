// SPDX-License-Identifier: MIT
#include "src/io/replica_runs.hpp"

#include <algorithm>

namespace ef {

ReplicaRuns::ReplicaRuns(std::vector<Run> runs) {
    for (const Run& r : runs) add(r.first, r.second);
}

void ReplicaRuns::add(std::int64_t r) { add(r, r + 1); }

void ReplicaRuns::add(std::int64_t first, std::int64_t last) {
    if (last <= first) return;
    if (!runs_.empty() && runs_.back().second == first) runs_.back().second = last;
    else {
        runs_.emplace_back(first, last);
        starts_.push_back(size_);
    }
    size_ += last - first;
}

std::vector<std::int64_t> ReplicaRuns::slice(std::int64_t begin, std::int64_t end) const {
    std::vector<std::int64_t> out;
    begin = std::max<std::int64_t>(begin, 0);
    end = std::min(end, size_);
    if (end <= begin) return out;
    out.reserve(static_cast<std::size_t>(end - begin));
    // the run that holds position `begin`: the last one starting at or before it
    auto k = static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin() - 1);
    for (std::int64_t pos = begin; pos < end; ++k) {
        const std::int64_t first = runs_[k].first + (pos - starts_[k]);
        const std::int64_t take = std::min(end - pos, runs_[k].second - first);
        for (std::int64_t i = 0; i < take; ++i) out.push_back(first + i);
        pos += take;
    }
    return out;
}

}  // namespace ef
