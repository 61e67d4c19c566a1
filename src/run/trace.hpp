// SPDX-License-Identifier: MIT
#pragma once

#include <array>
#include <chrono>
#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/sched/phase_timer.hpp>

namespace ef {

/**
 * One rank's timeline for `--trace FILE.json`: the PhaseTimer's intervals, contiguous by
 * construction (one phase is current at any time), so their durations add up to the rank's wall
 * time. Bounded in size: intervals shorter than `min_seconds` are gathered into one event until
 * it is that long (named after its largest phase, every phase's seconds in its args), and a
 * rank with more than `max_events` events has neighbours merged pairwise until it fits.
 * Device intervals (a GPU rank's kernels, from CUDA events) go on a track of their own.
 */
class PhaseTrace : public PhaseRecorder {
   public:
    using Clock = std::chrono::steady_clock;
    explicit PhaseTrace(double min_seconds = 1e-3, size_t max_events = 20000)
        : min_(min_seconds), max_events_(max_events) {}

    void add(Phase p, Clock::time_point begin, Clock::time_point end) override;
    /// A device interval (a kernel or launch group) of this rank's GPU.
    void add_device(const std::string& name, Clock::time_point begin, Clock::time_point end);

    /// One event: [begin, end) in seconds from the trace's first interval; the seconds of every
    /// phase inside it (one phase for an interval as timed, several for a gathered one).
    struct Event {
        double begin = 0, end = 0;
        std::array<double, kPhaseCount> phase{};
        Phase main() const;
    };
    /// The events after flushing what is gathered and merging down to max_events.
    std::vector<Event> events();
    struct Device {
        std::string name;
        double begin, end;
    };
    const std::vector<Device>& device_intervals() const { return device_; }
    /// Device intervals left out (over max_events, or over the tally's own bound).
    size_t device_dropped() const { return device_dropped_; }
    void add_device_dropped(size_t n) { device_dropped_ += n; }

   private:
    void push(const Event& e);
    double since_origin(Clock::time_point t);

    double min_;
    size_t max_events_;
    bool started_ = false;
    Clock::time_point origin_;
    std::vector<Event> events_;
    Event pending_;
    bool has_pending_ = false;
    std::vector<Device> device_;
    size_t device_dropped_ = 0;
    friend void write_trace(const MpiContext&, PhaseTrace&, const std::string&, const std::vector<std::string>&,
                            const std::string&);
};

class KernelTally;

/// A GPU worker's device intervals (CUDA events, on the host's clock) onto the trace's device
/// track; those the tally could not keep are counted in the track's name.
void add_device_intervals(PhaseTrace& trace, const KernelTally& tally);

/// Rank 0, before the run: exit 2 now, not after the run, when `path` cannot be written.
void check_trace_path(const std::string& path);

/**
 * Collective: gathers every rank's events on rank 0 (clocks aligned at a barrier, so ranks on
 * several hosts line up to the barrier's skew) and writes `path` in the Chrome trace-event
 * format (Perfetto, chrome://tracing): one process, one track (thread) per rank named after its
 * placement row, complete ("X") events in microseconds; device intervals on track 1000 + rank.
 * `title` names the process ("ensemblefit fit inputs/example.ini").
 */
void write_trace(const MpiContext& ctx, PhaseTrace& trace, const std::string& path,
                 const std::vector<std::string>& placement, const std::string& title);

}  // namespace ef
