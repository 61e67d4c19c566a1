// SPDX-License-Identifier: MIT
// One line and exit 4 for a model plugin that crashes (plugin_guard.hpp).
#include "src/model/plugin_guard.hpp"

#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include <ensemblefit/core/error.hpp>

namespace ef {
namespace {

// Written outside the handler; the handler only reads them.
char g_prefix[1024];
std::size_t g_prefix_size = 0;
volatile sig_atomic_t g_rank = 0;

void write_all(const char* p, std::size_t n) {
    while (n > 0) {
        const ssize_t w = write(2, p, n);
        if (w <= 0) return;
        p += w;
        n -= static_cast<std::size_t>(w);
    }
}

const char* signal_name(int sig) {
    switch (sig) {
        case SIGSEGV: return "SIGSEGV (invalid memory access)";
        case SIGBUS: return "SIGBUS (bus error)";
        case SIGFPE: return "SIGFPE (arithmetic exception)";
        case SIGILL: return "SIGILL (illegal instruction)";
        default: return "a fatal signal";
    }
}

extern "C" void on_plugin_crash(int sig) {
    if (g_rank != 0) {
        // Let rank 0's line be the run's one line when every rank crashes; the launcher ends
        // this process meanwhile. A rank that crashes alone still reports after the wait.
        timespec t{2, 0};
        while (nanosleep(&t, &t) != 0) {
        }
    }
    write_all(g_prefix, g_prefix_size);
    const char* name = signal_name(sig);
    write_all(name, std::strlen(name));
    static const char kTail[] = "; the run stops\n";
    write_all(kTail, sizeof kTail - 1);
    _exit(static_cast<int>(ExitCode::lost));
}

}  // namespace

void guard_plugin_crashes(const std::string& what) {
    const std::string prefix = "ensemblefit: error: the model plugin '" + what + ") crashed: ";
    const std::size_t n = std::min(prefix.size(), sizeof g_prefix);
    std::memcpy(g_prefix, prefix.data(), n);
    g_prefix_size = n;
    int initialized = 0, finalized = 0, rank = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    g_rank = rank;
    struct sigaction sa {};
    sa.sa_handler = on_plugin_crash;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) sigaction(sig, &sa, nullptr);
}

}  // namespace ef
