// SPDX-License-Identifier: MIT
// Graceful stop: the signal handlers (a flag only), the resume command and the notice.
#include "src/run/stop_request.hpp"

#include <atomic>
#include <cstdio>

#include "src/run/environment.hpp"

namespace ef {

namespace {

constexpr int kSignals[3] = {SIGUSR1, SIGTERM, SIGINT};

std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");
std::atomic<bool> g_stopped{false};

/// Only async-signal-safe work: store the number; on a second SIGTERM or SIGINT, the default
/// action (the process ends at once, as without a handler).
extern "C" void on_stop_signal(int sig) {
    const int before = g_signal.exchange(sig);
    if (before != 0 && (sig == SIGTERM || sig == SIGINT)) {
        std::signal(sig, SIG_DFL);
        std::raise(sig);
    }
}

/// A token as a POSIX shell reads it back: bare when it holds only safe characters, else in
/// single quotes (a quote inside as '\'').
std::string shell_quote(const std::string& a) {
    const bool safe = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                        "0123456789_./:=,+-@%") == std::string::npos;
    if (safe) return a;
    std::string out = "'";
    for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

}  // namespace

StopSignals::StopSignals() {
    g_signal.store(0);
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // MPI's and HDF5's system calls carry on; the run polls the flag
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &old_[i]);
}

StopSignals::~StopSignals() {
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &old_[i], nullptr);
}

int stop_signal() { return g_signal.load(std::memory_order_relaxed); }

std::string signal_name(int sig) {
    switch (sig) {
        case SIGUSR1: return "SIGUSR1";
        case SIGTERM: return "SIGTERM";
        case SIGINT: return "SIGINT";
        default: return "signal " + std::to_string(sig);
    }
}

std::string resume_command() {
    std::string line;
    for (const std::string& a : command_args()) {
        if (a == "--overwrite" || a == "--resume") continue;
        line += (line.empty() ? "" : " ") + shell_quote(a);
    }
    return line + " --resume";
}

void report_stopped(const MpiContext& ctx, int sig, const std::string& done, const std::string& output) {
    g_stopped = true;
    if (!ctx.is_root()) return;
    std::fflush(stdout);
    std::fprintf(stderr,
                 "ensemblefit: stopped on %s: %s written to %s; to finish, run under the same launcher:\n"
                 "  %s\n",
                 signal_name(sig).c_str(), done.c_str(), output.c_str(), resume_command().c_str());
    std::fflush(stderr);
}

bool stopped_early() { return g_stopped.load(); }

}  // namespace ef
