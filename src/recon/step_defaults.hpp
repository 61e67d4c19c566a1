// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <vector>

namespace ef::recon {

/**
 * The optimiser's defaults that follow the data (internal; docs/architecture.md "Choices and
 * why", "Step sizes that follow the data"). Adam already divides each parameter's gradient by
 * its running rms, so its step does not depend on the dose or the probe's power: a step is
 * `lr` in the parameter's own units (radians of phase, amplitude, and the probe's rms amplitude
 * sqrt(mean pattern sum / pixels) for the probe). What does depend on the data is how many steps
 * an iteration makes: ceil(N / batch) for N scan positions. A fixed batch of 256 gave one step
 * per iteration on a 16 x 16 scan and 64 on a 128 x 128 one, so no fixed rate suited both.
 */
/// Steps per iteration that solver.batch_size = auto aims for.
constexpr std::int64_t kAutoStepsPerIteration = 16;
/// The bounds of the automatic batch: fewer positions make steps noisy (and a GPU idle), more
/// cost memory for nothing once the steps per iteration are enough.
constexpr std::int64_t kAutoBatchMin = 16;
constexpr std::int64_t kAutoBatchMax = 256;

/// solver.batch_size = auto (0): ceil(positions / kAutoStepsPerIteration) within
/// [kAutoBatchMin, kAutoBatchMax] (and at most the positions); a given size is kept. A
/// function of the dataset only, so the same on every rank and on resume.
int resolve_batch_size(int configured, std::int64_t positions);

/// positions.start = auto (0): iterations / 5, at least 1; a given start is kept. Position
/// gradients of a flat first object point anywhere: moving positions from the first iteration
/// at a rate that corrects 1-2 px (0.02 px per step) made them worse (issue 38); a fifth of the
/// run lets the object take shape first (the tuned schedule of 50 iterations started at 10).
int resolve_positions_start(int configured, int iterations);

/// positions.lr = auto (< 0): 24 / (iterations - start + 1) pixels. A position takes one Adam step
/// per iteration (it is in one mini-batch; its own step count, Reconstruction::position_steps),
/// of about lr pixels while its gradient keeps its sign, and the cosine decay leaves ~0.43 of the
/// sum from a fifth of the run on: about 10 px of reach however long the run, which
/// positions.max_travel bounds; 5e-4 (the default before issue 38) moved 0.02 px in 50
/// iterations. 8, 16 and 24 over the updates measured on four simulated scans
/// (docs/reconstruction.md, "Position correction"); a given rate is kept.
double resolve_positions_lr(double configured, int iterations, int start);

/// The scan pitch: sqrt(area of the positions' bounding box / their number), in pixels (0 for
/// fewer than 2 positions; a line's: its length / (positions - 1)). Unlike the nearest-neighbour
/// median it hardly moves with position errors: errors of 2 px rms make the stored positions'
/// nearest neighbours 1.7 px apart on a spiral of step 2.87, and their pitch 3.17 (issue 38).
/// `yx` holds (y, x) pairs.
double scan_pitch(const std::vector<double>& yx);

/// positions.max_travel = auto (< 0): 2 x the scan pitch; a given bound is kept (0: none). A
/// position's gradient only finds the minimum it starts in, a couple of pixels wide on atomic
/// detail: one stored 5 px off on a lattice of 12 px (the simulator's) slid 7.9 px to a
/// lattice-equivalent place 12 px from the truth, which the patterns hardly tell apart (their
/// loss there is within the noise of the truth's). Errors of 1-2 px rms need up to ~5 px of
/// travel; the next equivalent place is a lattice constant away. Measured in
/// docs/reconstruction.md, "Position correction".
double resolve_positions_max_travel(double configured, double pitch);

}  // namespace ef::recon
