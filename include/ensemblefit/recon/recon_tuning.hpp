// SPDX-License-Identifier: MIT
#pragma once

namespace ef {

/// A [tuning] choice: `automatic` leaves it to the backend (its default says which), or forced.
enum class TuningSwitch { automatic, on, off };

/**
 * How a worker runs the model, not what it computes: the `[tuning]` keys of the reconstruction
 * config (recon_config.cpp lists them with their help; docs/reconstruction.md explains each),
 * read once at start. Defaults are the measured fastest; the others exist to test one sequence
 * against another and to measure them. Where a default differs by backend it is `automatic`,
 * resolved by the backend once, when it is made.
 */
struct ReconTuning {
    /// Deferred steps (a whole iteration queued on the device, no wait per batch): automatic =
    /// on for GPU workers, off for CPU workers (a CPU step has nothing to overlap). Same bits.
    TuningSwitch deferred = TuningSwitch::automatic;
    /// Window-resident passes for square 32, 64 and 128 pixel windows (one block per position,
    /// its FFTs in fast memory): automatic = on for GPU workers where the block fits the shared
    /// memory, off for CPU workers (FFTW is faster there). Another FFT: equal to rounding.
    TuningSwitch window = TuningSwitch::automatic;
    /// Mode groups of the window passes: 0 = chosen per batch from the device's multiprocessors
    /// (PtychoEngine::window_groups), else this many (a divisor of the modes).
    int window_groups = 0;
    /// A position's 2 or 4 mode groups as one thread-block cluster where the GPU has them
    /// (compute capability 9.0): the same sums in the same order as without.
    bool window_clusters = true;
    /// The window passes' per-position scratch in shared memory where it fits (else, as on
    /// devices with less shared memory, in global memory). Same bits.
    bool window_scratch = true;
};

}  // namespace ef
