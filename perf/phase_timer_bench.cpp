// SPDX-License-Identifier: MIT
// Cost of one PhaseTimer phase switch (what every work unit pays a handful of times).
#include <chrono>
#include <cstdio>

#include <ensemblefit/sched/phase_timer.hpp>

int main() {
    ef::PhaseTimer timer;
    const int n = 10'000'000;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) timer.enter(i & 1 ? ef::Phase::compute : ef::Phase::comm);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("{\"phase_switch_ns\": %.2f, \"switches\": %d}\n", 1e9 * s / n, n);
    return timer.seconds(ef::Phase::compute) > 0 ? 0 : 1;
}
