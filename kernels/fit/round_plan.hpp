// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "kernels/fit/lm.hpp"

namespace ef::batched {

/**
 * The requests of one round of a batched LM (host code, shared by the CPU and CUDA drivers of
 * the QR table path and the Gram path): the slots that asked for something, in slot order, the
 * kind of each request (0 Jacobian, 1 residuals), the first column of each in the round's W
 * and the request owning every column.
 */
struct RoundPlan {
    std::vector<int> slot, kind, owner;
    std::vector<long> col0;
    long cols = 0;

    /// From the slots' LmRequest codes; columns(kind) gives a request's column count. False when
    /// every slot is done.
    template <class Columns>
    bool build(const int* request, int count, Columns columns) {
        slot.clear();
        kind.clear();
        owner.clear();
        col0.clear();
        cols = 0;
        for (int s = 0; s < count; ++s) {
            const int q = request[s];
            if (q == static_cast<int>(LmRequest::done)) continue;
            const int k = q == static_cast<int>(LmRequest::jacobian) ? 0 : 1;
            const int c = columns(k);
            owner.insert(owner.end(), static_cast<size_t>(c), static_cast<int>(slot.size()));
            slot.push_back(s);
            kind.push_back(k);
            col0.push_back(cols);
            cols += c;
        }
        return !slot.empty();
    }
    int size() const { return static_cast<int>(slot.size()); }
};

}  // namespace ef::batched
