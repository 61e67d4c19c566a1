// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/core/error.hpp>

#include "src/run/run_failure.hpp"

/**
 * Reconstruction checkpoints (internal; docs/reconstruction.md, "Checkpoints and --resume").
 * A checkpoint is the output file itself with a /checkpoint group holding everything the next
 * iteration depends on: the object's parameters, the probe, the Adam moments of both (double,
 * exact for float), the positions and their moments, the Adam step counts, the mean pattern's
 * total, the shares, the loss history. Every write of the output (checkpoint or final) goes to
 * `<output>.creating` (PendingOutput) and is renamed over the output once closed and synced, so a kill at any
 * moment leaves the previous good file. The mini-batches need no saved state: they are a pure
 * function of (seed, iteration) (BatchSchedule).
 */
namespace ef::recon {

/// The positions as read, hashed: part of the data's identity a checkpoint records.
std::string positions_checksum(const std::vector<double>& positions);

/// What --resume found in the output (the same on every rank).
struct ResumePoint {
    bool complete = false;  ///< the output is a finished run: nothing to do
    int from = 0;           ///< iterations done at the checkpoint (0: start from scratch)
};

/// What the ranks decided at an iteration boundary (Reconstruction::at_boundary).
struct Boundary {
    int stop = 0;             ///< the stop signal (0: go on)
    bool checkpoint = false;  ///< write a checkpoint now
};

/// A refused --resume, thrown identically on every rank (agreed through collective()), so it
/// ends the run like a set-up error: one line from rank 0, its exit code, no abort.
class ResumeRefused : public AgreedFailure {
   public:
    explicit ResumeRefused(const Error& e) : AgreedFailure(e) {}
};

}  // namespace ef::recon
