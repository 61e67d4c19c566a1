// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace ef {

/**
 * What a worker's phases of model work did, for the roofline (/timing/kernels) and the trace:
 * per named phase (a kernel or a launch group: "gemm", "lm_steps", "window_forward"), the
 * seconds it took (the host's clock around the phase on a CPU worker, CUDA events around the
 * launch group on a GPU worker), how often it ran, and the FLOPs, bytes and items the launcher
 * counted where it knows them (the run multiplies items by the model's counted cost where
 * only it knows that). Device intervals (GPU workers) are kept for the trace's device track,
 * at most `max_intervals` (the first ones of a long run), in the host's clock.
 *
 * Plain host code (no CUDA, nothing from src/), filled by kernels/cpu and kernels/cuda, read by
 * the run when it writes its timing. One per worker; not thread-safe (a worker's phases are
 * timed by the thread that launches them).
 */
class KernelTally {
   public:
    using Clock = std::chrono::steady_clock;

    struct Entry {
        std::string name;
        double seconds = 0, flops = 0, bytes = 0, items = 0;
        long calls = 0;
    };
    struct Interval {
        std::string name;
        Clock::time_point begin, end;
    };

    explicit KernelTally(std::size_t max_intervals = 20000) : max_intervals_(max_intervals) {}

    /// Adds one run of phase `name` (created on first use; phases keep their first-use order).
    void add(const std::string& name, double seconds, double flops = 0, double bytes = 0, double items = 0) {
        Entry& e = entry(name);
        e.seconds += seconds;
        e.flops += flops;
        e.bytes += bytes;
        e.items += items;
        ++e.calls;
    }
    /// A device interval for the trace (bounded: later ones are counted, not kept).
    void interval(const std::string& name, Clock::time_point begin, Clock::time_point end) {
        if (intervals_.size() < max_intervals_) intervals_.push_back(Interval{name, begin, end});
        else ++dropped_;
    }
    /// A device interval of `seconds` that ended at `end` (events give lengths; the host's
    /// clock, read once the last event is known complete, gives the end).
    void interval_ending(const std::string& name, Clock::time_point end, double seconds) {
        interval(name, end - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)), end);
    }

    const std::vector<Entry>& entries() const { return entries_; }
    const std::vector<Interval>& intervals() const { return intervals_; }
    std::size_t dropped_intervals() const { return dropped_; }
    bool empty() const { return entries_.empty(); }

    /// Sum of the seconds of every phase (the device's busy time on a GPU worker).
    double seconds() const {
        double s = 0;
        for (const Entry& e : entries_) s += e.seconds;
        return s;
    }

    /// Times the scope with the host's clock into phase `name` (a CPU worker's phases).
    class Scope {
       public:
        Scope(KernelTally* t, const char* name, double flops = 0, double bytes = 0, double items = 0)
            : t_(t), name_(name), flops_(flops), bytes_(bytes), items_(items), t0_(Clock::now()) {}
        ~Scope() {
            if (t_) t_->add(name_, std::chrono::duration<double>(Clock::now() - t0_).count(), flops_, bytes_, items_);
        }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

       private:
        KernelTally* t_;
        const char* name_;
        double flops_, bytes_, items_;
        Clock::time_point t0_;
    };

   private:
    Entry& entry(const std::string& name) {
        for (Entry& e : entries_)
            if (e.name == name) return e;
        entries_.push_back(Entry{name});
        return entries_.back();
    }

    std::vector<Entry> entries_;
    std::vector<Interval> intervals_;
    std::size_t max_intervals_;
    std::size_t dropped_ = 0;
};

/// FLOPs of `count` complex 2-D FFTs of n points: 5 n log2 n each, the conventional count
/// (benchFFT's, which FFTW's own MFLOPS figures use), whatever the algorithm actually does.
inline double fft_flops(double n, double count) { return n > 1 ? 5.0 * n * std::log2(n) * count : 0.0; }

/**
 * Phases between marks timed by the host's clock (the CPU backend's mark(), where work is
 * synchronous): mark(name) ends the open phase, adding its time and counts to the tally, and
 * opens `name` ("" opens none); count() adds FLOPs and bytes to the open phase.
 */
class HostPhaseMarks {
   public:
    void mark(const char* name) {
        const KernelTally::Clock::time_point now = KernelTally::Clock::now();
        if (!open_.empty()) tally_.add(open_, std::chrono::duration<double>(now - t0_).count(), flops_, bytes_);
        open_ = name ? name : "";
        t0_ = now;
        flops_ = bytes_ = 0;
    }
    void count(double flops, double bytes) {
        flops_ += flops;
        bytes_ += bytes;
    }
    const KernelTally& tally() const { return tally_; }

   private:
    KernelTally tally_;
    std::string open_;
    KernelTally::Clock::time_point t0_{};
    double flops_ = 0, bytes_ = 0;
};

}  // namespace ef
