// SPDX-License-Identifier: MIT
#include "src/sched/batch_schedule.hpp"

#include <algorithm>
#include <numeric>

namespace ef {

namespace {

std::uint64_t splitmix(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

}  // namespace

BatchSchedule::BatchSchedule(std::int64_t positions, std::int64_t batch_size, std::uint64_t seed)
    : positions_(positions), strata_(std::max<std::int64_t>(1, std::min(batch_size, positions))), seed_(seed) {
    batches_ = (positions_ + strata_ - 1) / strata_;
}

void BatchSchedule::start_iteration(int iteration, std::int64_t s0, std::int64_t s1) {
    s0_ = s0;
    s1_ = s1;
    order_.clear();
    for (std::int64_t s = s0; s < s1; ++s) {
        const std::int64_t size = stratum_size(s);
        const size_t base = order_.size();
        for (std::int64_t i = 0; i < size; ++i) order_.push_back(i);
        const std::uint64_t key = splitmix(splitmix(splitmix(seed_) ^ static_cast<std::uint64_t>(iteration)) ^
                                           static_cast<std::uint64_t>(s));
        for (std::int64_t i = size - 1; i > 0; --i) {
            const std::uint64_t r = splitmix(key ^ static_cast<std::uint64_t>(i));
            const std::int64_t j = static_cast<std::int64_t>(r % static_cast<std::uint64_t>(i + 1));
            std::swap(order_[base + static_cast<size_t>(i)], order_[base + static_cast<size_t>(j)]);
        }
    }
}

std::vector<std::int64_t> BatchSchedule::members(std::int64_t t) const {
    std::vector<std::int64_t> out;
    size_t base = 0;
    for (std::int64_t s = s0_; s < s1_; ++s) {
        const std::int64_t size = stratum_size(s);
        if (t < size) out.push_back(stratum_begin(s) + order_[base + static_cast<size_t>(t)]);
        base += static_cast<size_t>(size);
    }
    return out;
}

std::vector<std::int64_t> BatchSchedule::partition(std::int64_t strata, const std::vector<double>& weights) {
    const size_t R = weights.size();
    std::vector<std::int64_t> count(R, 0);
    std::vector<double> w(R);
    double total = 0;
    for (size_t r = 0; r < R; ++r) total += (w[r] = std::max(0.0, weights[r]));
    if (!(total > 0)) {  // no measurement yet: equal shares
        std::fill(w.begin(), w.end(), 1.0);
        total = static_cast<double>(R);
    }
    // Proportional shares by largest remainder, then at least one stratum per rank while there
    // are enough (taken from the largest shares).
    std::vector<double> exact(R);
    std::int64_t given = 0;
    for (size_t r = 0; r < R; ++r) {
        exact[r] = static_cast<double>(strata) * w[r] / total;
        count[r] = std::min(strata, static_cast<std::int64_t>(exact[r]));
        given += count[r];
    }
    std::vector<size_t> order(R);
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return exact[a] - static_cast<double>(count[a]) > exact[b] - static_cast<double>(count[b]);
    });
    for (size_t i = 0; given < strata; i = (i + 1) % R, ++given) ++count[order[i]];
    if (strata >= static_cast<std::int64_t>(R))
        for (size_t r = 0; r < R; ++r)
            while (count[r] == 0) {
                const size_t big = static_cast<size_t>(std::max_element(count.begin(), count.end()) - count.begin());
                --count[big];
                ++count[r];
            }
    std::vector<std::int64_t> bounds(R + 1, 0);
    for (size_t r = 0; r < R; ++r) bounds[r + 1] = bounds[r] + count[r];
    return bounds;
}

}  // namespace ef
