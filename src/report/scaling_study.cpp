// SPDX-License-Identifier: MIT
#include "src/report/scaling_study.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "src/io/results_file.hpp"

namespace ef {

namespace {
/// Relative closeness on a log scale: |log(a / b)|, large when either is not positive.
double log_distance(double a, double b) {
    return a > 0 && b > 0 ? std::fabs(std::log(a / b)) : 1e300;
}
constexpr double kTolerance = 0.0953;  // log(1.1): within 10 %
constexpr double kLoose = 0.405;       // log(1.5)
}  // namespace

const char* to_string(ScalingMode m) {
    switch (m) {
        case ScalingMode::strong: return "strong";
        case ScalingMode::weak: return "weak";
        default: return "other";
    }
}

std::string WorkerMix::group() const {
    if (gpu > 0 && cpu > 0) return "mixed";
    return gpu > 0 ? "gpu" : "cpu";
}

WorkerMix worker_mix(const std::vector<std::string>& placement) {
    WorkerMix m;
    for (const std::string& row : placement) {
        const size_t a = row.find('\t');
        const size_t b = a == std::string::npos ? a : row.find('\t', a + 1);
        const std::string worker = b == std::string::npos ? "" : row.substr(b + 1, 3);
        (worker == "gpu" ? m.gpu : m.cpu) += 1;
        const size_t c = b == std::string::npos ? b : row.find('\t', b + 1);
        if (worker != "gpu") m.cpu_cores += c == std::string::npos ? 1 : std::max(1, std::atoi(row.c_str() + c + 1));
    }
    return m;
}

ScalingMode detect_scaling_mode(double work_ratio, double unit_ratio) {
    const double strong = log_distance(work_ratio, 1.0);
    const double weak = log_distance(work_ratio, unit_ratio);
    // the closer one, if it is clearly closer (a fixed item per run, such as the central fit,
    // moves small weak studies off N: 2 replicas per rank + 1 on 1, 2, 4 ranks is 3, 5, 9)
    if (strong <= weak && (strong <= kTolerance || (strong <= kLoose && 2 * strong < weak))) return ScalingMode::strong;
    if (weak < strong && (weak <= kTolerance || (weak <= kLoose && 2 * weak < strong))) return ScalingMode::weak;
    return ScalingMode::automatic;
}

ScalingPoint scaling_point(const ScalingInput& run, const ScalingInput& base, ScalingMode forced) {
    ScalingPoint p;
    const int n = run.workers.units(), n0 = base.workers.units();
    p.unit_ratio = n0 > 0 ? static_cast<double>(n) / n0 : 0.0;
    p.work_ratio = base.items > 0 ? run.items / base.items : 0.0;
    p.mode = forced == ScalingMode::automatic ? detect_scaling_mode(p.work_ratio, p.unit_ratio) : forced;
    const double w = p.mode == ScalingMode::strong ? 1.0 : p.mode == ScalingMode::weak ? p.unit_ratio : p.work_ratio;
    p.assumed_work = w;
    p.speedup = run.runtime > 0 ? w * base.runtime / run.runtime : 0.0;
    p.efficiency = p.unit_ratio > 0 ? p.speedup / p.unit_ratio : 0.0;
    return p;
}

ScalingMode detect_study_mode(const std::vector<ScalingInput>& runs, const ScalingInput& base) {
    ScalingMode seen = ScalingMode::automatic;
    for (const ScalingInput& r : runs) {
        if (r.workers.units() == base.workers.units()) continue;  // tells nothing: both fit
        const ScalingMode m = scaling_point(r, base, ScalingMode::automatic).mode;
        if (m == ScalingMode::automatic) return m;
        if (seen != ScalingMode::automatic && m != seen) return ScalingMode::automatic;
        seen = m;
    }
    return seen;
}

double rank_throughput(const ScalingInput& run) {
    const int n = run.workers.units();
    return run.runtime > 0 && n > 0 ? run.items / run.runtime / n : 0.0;
}

double mixed_efficiency(const ScalingInput& run, double gpu_rank_throughput, double cpu_rank_throughput) {
    const double ideal = run.workers.gpu * gpu_rank_throughput + run.workers.cpu_units() * cpu_rank_throughput;
    return ideal > 0 && run.runtime > 0 ? run.items / run.runtime / ideal : 0.0;
}

std::string work_difference(const std::string& config_a, const std::string& config_b, bool replicas_too) {
    for (const std::string& d : config_differences(config_b, config_a)) {
        const std::string key = d.substr(0, d.find(" = "));
        const std::string section = key.substr(0, key.find('.'));
        if (section == "run" || section == "output" || section == "sched" || section == "tuning" || section == "debug")
            continue;
        if (key == "fit.replicas" && !replicas_too) continue;
        return d;
    }
    return "";
}

}  // namespace ef
