// SPDX-License-Identifier: MIT
#pragma once

#include <vector>

#include "kernels/core/hd.hpp"
#include "kernels/fit/lm.hpp"
#include "kernels/fit/lm_batched.hpp"
#include "kernels/fit/lm_gram.hpp"

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

/// The GEMM epilogue of a round on either path: output (row, j) of slot s's columns into the
/// slot's residuals and Jacobian (QR table path) or its H (Gram path).
EF_HD inline void store_column(const BatchView& b, int s, int kind, int j, long row, double f) {
    store_output(b, s, kind, j, static_cast<int>(row), f);
}
EF_HD inline void store_column(const gram::GramView& v, int s, int /*kind*/, int j, long row, double h) {
    gram::store_h(v, s, j, row, h);
}

/// The LM steps after a round's GEMM on either path (the Gram path's also read the slot's W
/// columns, from column col0 of the round's W).
template <class Exec>
EF_HD void finish_request(const Exec& ex, const BatchView& b, int s, int kind, const double* /*W*/, long /*col0*/) {
    finish_slot(ex, b, s, kind);
}
template <class Exec>
EF_HD void finish_request(const Exec& ex, const gram::GramView& v, int s, int kind, const double* W, long col0) {
    gram::finish_slot(ex, v, s, kind, W, col0);
}

}  // namespace ef::batched
