// SPDX-License-Identifier: MIT
// Scalar cost of ef::math (kernels/core/ef_math.hpp) next to glibc's versions, same arguments,
// same run. Build and run from the repository root:
//   g++ -O2 -std=c++20 -ffp-contract=off -I. perf/bench_ef_math.cpp -o bench_ef_math
//   ./bench_ef_math > perf/out/<machine>-<date>.json
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/core/ef_math.hpp"

namespace {

/// Best of 7 passes over the arguments, in ns per call (throughput: calls are independent).
template <class F>
double ns_per_call(F f, const std::vector<double>& x, const std::vector<double>& y, double& sink) {
    double best = 1e30;
    for (int rep = 0; rep < 7; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        double acc = 0.0;
        for (std::size_t i = 0; i < x.size(); ++i) acc += f(x[i], y[i]);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        sink += acc;
        if (s < best) best = s;
    }
    return 1e9 * best / static_cast<double>(x.size());
}

}  // namespace

int main() {
    const std::size_t n = 1 << 20;
    std::mt19937_64 g(42);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<double> wide(n), pos(n), trig(n), big(n), y(n);
    for (std::size_t i = 0; i < n; ++i) {
        wide[i] = 700.0 * u(g);                        // exp
        pos[i] = std::exp2(60.0 * u(g));               // log, pow base, atan
        trig[i] = 10.0 * u(g);                         // sin, cos, tan (Cody-Waite path)
        big[i] = std::exp2(100.0 * (u(g) + 1.0) + 21);  // sin, cos (Payne-Hanek path)
        y[i] = 10.0 * u(g);                            // pow exponent, atan2 x
    }
    double sink = 0.0;
    struct Row {
        const char* name;
        double ef;
        double libm;
    };
    std::vector<Row> rows;
    auto both = [&](const char* name, auto fe, auto fs, const std::vector<double>& a,
                    const std::vector<double>& b) {
        rows.push_back({name, ns_per_call(fe, a, b, sink), ns_per_call(fs, a, b, sink)});
    };
    namespace m = ef::math;
    both("exp", [](double a, double) { return m::exp(a); },
         [](double a, double) { return std::exp(a); }, wide, y);
    both("log", [](double a, double) { return m::log(a); },
         [](double a, double) { return std::log(a); }, pos, y);
    both("pow", [](double a, double b) { return m::pow(a, b); },
         [](double a, double b) { return std::pow(a, b); }, pos, y);
    both("sin", [](double a, double) { return m::sin(a); },
         [](double a, double) { return std::sin(a); }, trig, y);
    both("cos", [](double a, double) { return m::cos(a); },
         [](double a, double) { return std::cos(a); }, trig, y);
    both("tan", [](double a, double) { return m::tan(a); },
         [](double a, double) { return std::tan(a); }, trig, y);
    both("sin_huge", [](double a, double) { return m::sin(a); },
         [](double a, double) { return std::sin(a); }, big, y);
    both("atan", [](double a, double) { return m::atan(a); },
         [](double a, double) { return std::atan(a); }, pos, y);
    both("atan2", [](double a, double b) { return m::atan2(a, b); },
         [](double a, double b) { return std::atan2(a, b); }, y, trig);

    std::printf("{\n  \"calls_per_pass\": %zu,\n  \"functions\": [\n", n);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        std::printf("    {\"name\": \"%s\", \"ef_ns\": %.2f, \"glibc_ns\": %.2f, \"ratio\": %.2f}%s\n",
                    rows[i].name, rows[i].ef, rows[i].libm, rows[i].ef / rows[i].libm,
                    i + 1 < rows.size() ? "," : "");
    }
    std::printf("  ],\n  \"sink\": %g\n}\n", sink);
    return 0;
}
