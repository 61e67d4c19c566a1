// SPDX-License-Identifier: MIT
#pragma once

#include <array>
#include <chrono>
#include <string>

namespace ef {

/// Where a rank's wall time goes (docs/architecture.md, "Timing").
enum class Phase : int { setup = 0, compute, comm, sync, sched, idle, io, count_ };

inline constexpr int kPhaseCount = static_cast<int>(Phase::count_);
const char* to_string(Phase p);

/**
 * Receives every closed phase interval of a PhaseTimer (the `--trace` timeline, src/run/trace.hpp).
 * Called on the thread that switches phases, after the totals are updated.
 */
class PhaseRecorder {
   public:
    virtual ~PhaseRecorder() = default;
    virtual void add(Phase p, std::chrono::steady_clock::time_point begin, std::chrono::steady_clock::time_point end) = 0;
};

/**
 * Splits one rank's wall time into phases. Exactly one phase is current at any time (switch()
 * moves the clock from one to the next), so the phases add up to the wall time by
 * construction. Cheap enough (one steady_clock read per switch) to run in every run.
 */
class PhaseTimer {
   public:
    using Clock = std::chrono::steady_clock;
    PhaseTimer() : start_(Clock::now()), last_(start_) {}

    /// Makes `p` the current phase; returns the previous one.
    Phase enter(Phase p) {
        const auto now = Clock::now();
        seconds_[static_cast<size_t>(current_)] += std::chrono::duration<double>(now - last_).count();
        if (recorder_) recorder_->add(current_, last_, now);
        last_ = now;
        const Phase prev = current_;
        current_ = p;
        return prev;
    }
    /// Closes the current phase so totals are final.
    void stop() { enter(current_); }
    double seconds(Phase p) const { return seconds_[static_cast<size_t>(p)]; }
    /**
     * Moves up to `s` seconds already spent from phase `from` to phase `to` (never more than
     * `from` holds, so the phases still add up to the wall time). For time the host spent in
     * one phase while a device worked through several: its timeline is measured separately.
     */
    void move(Phase from, Phase to, double s) {
        enter(current_);
        double& f = seconds_[static_cast<size_t>(from)];
        s = s > f ? f : (s > 0 ? s : 0.0);
        f -= s;
        seconds_[static_cast<size_t>(to)] += s;
    }
    double wall() const { return std::chrono::duration<double>(last_ - start_).count(); }
    /// Every interval from now on also goes to `r` (nullptr: none); `r` must outlive the timer's use.
    void record_to(PhaseRecorder* r) { recorder_ = r; }
    const std::array<double, kPhaseCount>& all() const { return seconds_; }

    /// RAII: a phase for the lifetime of the object, then back to the previous one.
    class Scope {
       public:
        Scope(PhaseTimer& t, Phase p) : t_(t), prev_(t.enter(p)) {}
        ~Scope() { t_.enter(prev_); }
        Scope(const Scope&) = delete;
        Scope& operator=(const Scope&) = delete;

       private:
        PhaseTimer& t_;
        Phase prev_;
    };

   private:
    Clock::time_point start_, last_;
    Phase current_ = Phase::setup;
    std::array<double, kPhaseCount> seconds_{};
    PhaseRecorder* recorder_ = nullptr;
};

}  // namespace ef
