// SPDX-License-Identifier: MIT
// The prediction behind `ensemblefit advise` (docs/architecture.md, "Advice before a run"):
// plain arithmetic on what the calibration measured, so that it can be tested by hand.
#include "src/run/advise_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace ef::advise {

Linear fit_linear(const std::vector<double>& x, const std::vector<double>& y) {
    const size_t n = std::min(x.size(), y.size());
    Linear l;
    if (n == 0) return l;
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t i, size_t j) { return x[i] < x[j]; });
    if (n > 1 && x[order.front()] == x[order.back()]) {  // no spread in size: a constant
        for (size_t i = 0; i < n; ++i) l.a += y[i] / static_cast<double>(n);
        return l;
    }
    // The slope from the larger half of the units (where it dominates timing noise): least
    // squares there, or through the origin for a single point.
    double sx = 0, sy = 0, sxx = 0, sxy = 0, m = 0;
    for (size_t k = n / 2; k < n; ++k) {
        const double xi = x[order[k]], yi = y[order[k]];
        sx += xi;
        sy += yi;
        sxx += xi * xi;
        sxy += xi * yi;
        m += 1;
    }
    const double det = m * sxx - sx * sx;
    l.b = m >= 2 && det > 1e-12 * m * sxx ? (m * sxy - sx * sy) / det : sxy / sxx;
    l.b = std::max(0.0, l.b);
    // The fixed cost: the median of what the slope leaves, over every unit (small ones too).
    std::vector<double> rest(n);
    for (size_t i = 0; i < n; ++i) rest[i] = y[i] - l.b * x[i];
    std::nth_element(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(n / 2), rest.end());
    l.a = std::max(0.0, rest[n / 2]);
    return l;
}

std::string Placement::label() const {
    char b[128];
    std::string s;
    if (gpus > 0) {
        std::snprintf(b, sizeof b, "%d gpu x %d rank%s", gpus, ranks_per_gpu, ranks_per_gpu == 1 ? "" : "s");
        s = b;
    }
    if (cpu_ranks > 0) {
        std::snprintf(b, sizeof b, "%s%d cpu x %d thread%s", s.empty() ? "" : " + ", cpu_ranks, threads,
                      threads == 1 ? "" : "s");
        s += b;
    }
    return s;
}

std::vector<Placement> candidate_placements(int cores, int gpus, const std::vector<int>& ranks_per_gpu, bool cpu,
                                            bool gpu) {
    std::vector<Placement> out;
    cores = std::max(cores, 1);
    if (cpu) {
        std::vector<int> counts;
        for (int p = 1; p < cores; p *= 2) counts.push_back(p);
        counts.push_back(cores);
        for (int p : counts) out.push_back(Placement{p, std::max(1, cores / p), 0, 0});
    }
    if (!gpu || gpus <= 0) return out;
    for (int k : ranks_per_gpu) out.push_back(Placement{0, 1, gpus, k});
    if (!cpu) return out;
    for (int k : ranks_per_gpu)  // GPU ranks beside one-thread CPU ranks on the cores they leave
        if (cores - gpus * k > 0) out.push_back(Placement{cores - gpus * k, 1, gpus, k});
    return out;
}

namespace {

/// Speed of T threads relative to T times one thread: 1 at one thread, the measured value at
/// every core, in between on a straight line.
double thread_efficiency(const ProblemModel& m, int threads) {
    if (m.cores <= 1 || threads <= 1) return 1.0;
    const double f = static_cast<double>(threads - 1) / static_cast<double>(m.cores - 1);
    return std::clamp(1.0 - (1.0 - m.cpu.thread_efficiency) * std::min(f, 1.0), 0.05, 1.0);
}

/// More threads and GPU ranks' host threads than cores share the cores.
double oversubscription(const ProblemModel& m, const Placement& p) {
    return std::max(1.0, static_cast<double>(p.cpu_ranks * p.threads + p.gpu_ranks()) / std::max(m.cores, 1));
}

/// Starting the processes and MPI, and ending them: outside what a run's /timing measures.
double launch(const ProblemModel& m, const Placement& p) { return m.launch + m.launch_per_rank * (p.ranks() - 1); }

/// The start-up before the first unit and the output after the last, on the slowest rank.
double outside_compute(const ProblemModel& m, const Placement& p, double items) {
    // Ranks sharing a GPU make and destroy their contexts on it one after the other (the
    // driver serialises them): the last rank waits for the others' (H100: 2 ranks of the spot
    // ensemble 0.2-0.3 s slower than 1, 4 ranks 0.5-0.7 s).
    const double gpu_fixed = m.gpu.fixed + std::max(0, p.ranks_per_gpu - 1) * (m.gpu_context + m.gpu_teardown);
    const double fixed =
        std::max(p.cpu_ranks > 0 ? m.cpu.fixed_at(p.threads) : 0.0, p.gpu_ranks() > 0 ? gpu_fixed : 0.0);
    return launch(m, p) + fixed + m.io.at(items);
}

/// A CPU unit of `u` items: its fixed cost, and its busiest thread's items at T threads.
double cpu_unit(const ProblemModel& m, const Placement& p, double u) {
    return m.cpu.unit.a + m.cpu.unit.b * std::ceil(u / p.threads) / thread_efficiency(m, p.threads) *
                              oversubscription(m, p);
}

/// A GPU unit of `u` items with `ranks_per_gpu` ranks on the device: the host side (launches,
/// the fixed cost a) overlaps the other ranks' kernels, the device side (b u) takes its turn.
double gpu_unit(const ProblemModel& m, const Placement& p, double u) {
    const double alone = m.gpu.unit.at(u);
    return std::max(alone, p.ranks_per_gpu * m.gpu.unit.b * u);
}

/// The largest loss of the wall time, in words.
std::string name_bound(double wall, double outside, double imbalance, double unit_overhead, double oversub,
                       bool gpu) {
    struct Loss {
        double share;
        const char* what;
    };
    const Loss losses[] = {
        {outside / wall, "start-up and output (the problem is short for this many ranks)"},
        {imbalance / wall, "load balance (too few units per rank at the end)"},
        {unit_overhead / wall, gpu ? "fixed cost per unit (launches, LM rounds: too few items per GPU rank)"
                                   : "fixed cost per unit (too few items per unit)"},
        {oversub > 1.0 ? 1.0 - 1.0 / oversub : 0.0, "more threads than cores"},
    };
    const Loss* worst = std::max_element(std::begin(losses), std::end(losses),
                                         [](const Loss& a, const Loss& b) { return a.share < b.share; });
    if (worst->share < 0.1) return gpu ? "the GPU's throughput (busy)" : "compute (the cores are busy)";
    char b[160];
    std::snprintf(b, sizeof b, "%s, %.0f %%", worst->what, 100 * worst->share);
    return b;
}

Prediction predict_fit(const ProblemModel& m, const Placement& p) {
    Prediction r;
    r.placement = p;
    const double M = m.items;
    const double P = p.ranks();
    // The unit sizes FitRun::unit_size chooses (src/fit/ensemble_run.cpp).
    const double uc = std::clamp(std::floor(M / (8 * P)), 1.0, 4.0 * p.threads);
    const double ug = std::max(1.0, std::ceil(M / (2 * std::max(1.0, static_cast<double>(p.gpu_ranks())))));  // over GPU ranks
    const double tc = p.cpu_ranks > 0 ? cpu_unit(m, p, uc) : 0.0;
    const double tg = p.gpu_ranks() > 0 ? gpu_unit(m, p, ug) : 0.0;
    double mean = 0, overhead = 0;
    if (p.gpu_ranks() == 0 || p.cpu_ranks == 0) {  // one kind: whole rounds of units
        const bool gpu = p.cpu_ranks == 0;
        const double u = gpu ? ug : uc, t = gpu ? tg : tc;
        const double units = std::ceil(M / u);
        r.compute = std::ceil(units / P) * t;
        mean = units * t / P;
        overhead = (gpu ? m.gpu.unit.a : m.cpu.unit.a) * units / P;
    } else {  // dynamic units share the replicas by speed; the last unit is half done on average
        const double rate = p.cpu_ranks * uc / tc + p.gpu_ranks() * ug / tg;
        mean = M / rate;
        r.compute = mean + 0.5 * std::max(tc, tg);
        overhead = m.gpu.unit.a * mean / tg;
    }
    const double outside = outside_compute(m, p, M);
    r.wall = outside + r.compute;
    r.efficiency = mean / r.wall;
    r.bound = name_bound(r.wall, outside, r.compute - mean, overhead, oversubscription(m, p), p.gpu_ranks() > 0);
    return r;
}

/// Mini-batches: every rank takes a share of each batch in proportion to its speed, then the
/// gradients are summed over the ranks (two passes over the bytes, a latency per stage).
Prediction predict_recon(const ProblemModel& m, const Placement& p) {
    Prediction r;
    r.placement = p;
    const double P = p.ranks();
    const double batches = std::ceil(m.items / std::max(m.batch, 1.0)) * (m.iterations + m.trial_iterations);
    double rate = 0, fixed = 0;
    if (p.cpu_ranks > 0 && m.cpu.unit.b > 0) {
        rate += p.cpu_ranks * p.threads * thread_efficiency(m, p.threads) / (m.cpu.unit.b * oversubscription(m, p));
        fixed = std::max(fixed, m.cpu.unit.a);
    }
    if (p.gpu_ranks() > 0 && m.gpu.unit.b > 0) {
        rate += p.gpus / m.gpu.unit.b;  // ranks sharing a GPU share its throughput
        fixed = std::max(fixed, m.gpu.unit.a);
    }
    const double share = rate > 0 ? std::min(m.batch, m.items) / rate : 0.0;
    double sum = P > 1 ? 2.0 * (P - 1) / P * m.allreduce_bytes / m.bandwidth + 20e-6 * std::ceil(std::log2(P))
                       : 0.0;
    // Measured at 2 ranks (advise's 2-rank run): the ranks' meeting at each batch grows with the
    // depth of the reduction tree; ranks sharing a GPU take turns on it, one more context each.
    if (P > 1) {
        if (m.cpu.batch_sync_measured) sum = std::max(sum, m.cpu.batch_sync * std::ceil(std::log2(P)));
        if (p.ranks_per_gpu > 1 && m.gpu.batch_sync_measured)
            sum = std::max(sum, m.gpu.batch_sync * (p.ranks_per_gpu - 1));
    }
    const double mean = batches * (fixed + share);
    r.compute = mean;
    const double outside = outside_compute(m, p, m.items);
    r.wall = outside + mean + batches * sum;
    r.efficiency = mean / r.wall;
    r.bound = name_bound(r.wall, outside, batches * sum, batches * fixed, oversubscription(m, p), p.gpu_ranks() > 0);
    if (batches * sum > std::max(outside, batches * fixed) && batches * sum > 0.1 * r.wall)
        r.bound = "the gradient sum between ranks";
    return r;
}

}  // namespace

Prediction predict(const ProblemModel& m, const Placement& p) {
    Prediction r = m.recon ? predict_recon(m, p) : predict_fit(m, p);
    // Later ranks' start lands in /timing (rank 0's set-up waits for them); its own does not.
    r.runtime = std::max(0.0, r.wall - m.launch);
    return r;
}

size_t recommend(const std::vector<Prediction>& rows) {
    if (rows.empty()) return 0;
    size_t best = 0;
    for (size_t i = 1; i < rows.size(); ++i)
        if (rows[i].wall < rows[best].wall) best = i;
    // Within the model's resolution: fewer GPUs, then fewer cores, then fewer threads per rank
    // (one rank per core, the project's default: no OpenMP barriers inside a unit).
    auto cost = [](const Placement& p) {
        return std::array<int, 3>{p.gpus, p.cpu_ranks * p.threads + p.gpu_ranks(), p.threads};
    };
    size_t pick = best;
    for (size_t i = 0; i < rows.size(); ++i)
        if (rows[i].wall <= 1.03 * rows[best].wall && cost(rows[i].placement) < cost(rows[pick].placement)) pick = i;
    return pick;
}

}  // namespace ef::advise
