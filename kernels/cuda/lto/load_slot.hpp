// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

namespace ef::recon {

/// What a cuFFT load callback reads through callerInfo: the load functor and the first row of
/// the FFT's batch (an FFT over rows [row0, row0 + count) of a larger tensor, in chunks).
template <class L>
struct LoadSlot {
    std::int64_t row0;
    L load;
};

}  // namespace ef::recon
