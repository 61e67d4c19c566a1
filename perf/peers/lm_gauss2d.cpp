// SPDX-License-Identifier: MIT
// Peer of `ensemblefit fit inputs/spot.ini --model.name gaussian2d --fit.precision float` for
// perf/formula.sh cpu: the smallest single-threaded Levenberg-Marquardt that does the
// same work in plain C++ loops, written like Cpufit's (GAUSS_2D, least squares, float, analytic
// derivatives, lambda x10 / /10 on A + lambda diag(A), stop when chi^2 changes by less than
// `tolerance` relative, at most 20 iterations). Each replica smears the spot's counts by
// sigma * N(0, 1) (xorshift + Box-Muller) and fits from the config's start values.
//
//   lm_gauss2d SPOT.csv REPLICAS [TOLERANCE]   -> one JSON line on stdout
//
// Built with -DPEER_EF_EXP (and -I the source tree) the model's exp is ensemblefit's
// ef::math::exp_float instead of libm's expf: the same work with the project's math, which
// separates the cost of exact, device-identical float exp from the rest of the LM.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifdef PEER_EF_EXP
#include "kernels/core/ef_math.hpp"
#endif

namespace {

constexpr int kP = 5;

float model_exp(float v) {
#ifdef PEER_EF_EXP
    return ef::math::exp_float(v);
#else
    return std::exp(v);
#endif
}

struct Spot {
    std::vector<float> x0, x1, y, w;  // w = 1 / sigma^2
};

Spot read_spot(const char* path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);  // px,py,counts,sigma
    Spot s;
    while (std::getline(in, line)) {
        std::istringstream row(line);
        float v[4];
        char comma;
        row >> v[0] >> comma >> v[1] >> comma >> v[2] >> comma >> v[3];
        s.x0.push_back(v[0]);
        s.x1.push_back(v[1]);
        s.y.push_back(v[2]);
        s.w.push_back(1.0f / (v[3] * v[3]));
    }
    return s;
}

/// chi^2 at p; with J, also A = J^T W J (full) and g = J^T W r.
float evaluate(const Spot& s, const float* y, const float* p, float* A, float* g) {
    if (A != nullptr)
        for (int k = 0; k < kP * kP; ++k) A[k] = 0;
    if (g != nullptr)
        for (int k = 0; k < kP; ++k) g[k] = 0;
    float chi2 = 0;
    const float inv2s2 = 1.0f / (2.0f * p[3] * p[3]);
    for (size_t i = 0; i < s.y.size(); ++i) {
        const float du = s.x0[i] - p[1], dv = s.x1[i] - p[2];
        const float r2 = du * du + dv * dv;
        const float e = model_exp(-r2 * inv2s2);
        const float f = p[0] * e + p[4];
        const float r = y[i] - f;
        chi2 += s.w[i] * r * r;
        if (A == nullptr) continue;
        const float j[kP] = {e, p[0] * e * du * 2 * inv2s2, p[0] * e * dv * 2 * inv2s2,
                             p[0] * e * r2 * 2 * inv2s2 / p[3], 1.0f};
        for (int a = 0; a < kP; ++a) {
            g[a] += s.w[i] * j[a] * r;
            for (int b = 0; b <= a; ++b) A[a * kP + b] += s.w[i] * j[a] * j[b];
        }
    }
    return chi2;
}

/// Solves (A + lambda diag A) d = g by Cholesky (lower triangle of A used); false if singular.
bool solve(const float* A, const float* g, float lambda, float* d) {
    float L[kP * kP];
    for (int a = 0; a < kP; ++a)
        for (int b = 0; b <= a; ++b) L[a * kP + b] = A[a * kP + b] * (a == b ? 1 + lambda : 1);
    for (int j = 0; j < kP; ++j) {
        float s = L[j * kP + j];
        for (int k = 0; k < j; ++k) s -= L[j * kP + k] * L[j * kP + k];
        if (!(s > 0)) return false;
        L[j * kP + j] = std::sqrt(s);
        for (int i = j + 1; i < kP; ++i) {
            float t = L[i * kP + j];
            for (int k = 0; k < j; ++k) t -= L[i * kP + k] * L[j * kP + k];
            L[i * kP + j] = t / L[j * kP + j];
        }
    }
    float z[kP];
    for (int i = 0; i < kP; ++i) {
        float t = g[i];
        for (int k = 0; k < i; ++k) t -= L[i * kP + k] * z[k];
        z[i] = t / L[i * kP + i];
    }
    for (int i = kP - 1; i >= 0; --i) {
        float t = z[i];
        for (int k = i + 1; k < kP; ++k) t -= L[k * kP + i] * d[k];
        d[i] = t / L[i * kP + i];
    }
    return true;
}

/// One fit; returns its iterations.
int fit(const Spot& s, const float* y, float* p, float tolerance) {
    float A[kP * kP], g[kP], d[kP], trial[kP];
    float lambda = 1e-3f;
    float chi2 = evaluate(s, y, p, A, g);
    for (int it = 1; it <= 20; ++it) {
        if (!solve(A, g, lambda, d)) return it;
        for (int k = 0; k < kP; ++k) trial[k] = p[k] + d[k];
        const float c = evaluate(s, y, trial, nullptr, nullptr);
        if (c < chi2) {
            const bool done = (chi2 - c) / chi2 < tolerance;
            for (int k = 0; k < kP; ++k) p[k] = trial[k];
            chi2 = evaluate(s, y, p, A, g);
            lambda *= 0.1f;
            if (done) return it;
        } else {
            lambda *= 10.0f;
        }
    }
    return 20;
}

double cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: lm_gauss2d SPOT.csv REPLICAS [TOLERANCE]\n");
        return 2;
    }
    const Spot s = read_spot(argv[1]);
    const long replicas = std::atol(argv[2]);
    const float tolerance = argc > 3 ? std::strtof(argv[3], nullptr) : 1e-4f;
    std::uint64_t state = 0x9e3779b97f4a7c15ULL;
    auto uniform = [&] {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return (static_cast<double>(state >> 11) + 0.5) * 0x1.0p-53;
    };
    std::vector<float> y(s.y.size());
    long iterations = 0;
    double checksum = 0;
    const double t0 = cpu_seconds();
    for (long r = 0; r < replicas; ++r) {
        for (size_t i = 0; i < y.size(); ++i) {
            const double z = std::sqrt(-2 * std::log(uniform())) * std::cos(2 * M_PI * uniform());
            y[i] = s.y[i] + static_cast<float>(z) / std::sqrt(s.w[i]);
        }
        float p[kP] = {80, 7, 7, 2.5f, 5};
        iterations += fit(s, y.data(), p, tolerance);
        checksum += p[1];
    }
    const double cpu = cpu_seconds() - t0;
#ifdef PEER_EF_EXP
    const char* name = "lm_gauss2d_ef_exp";
#else
    const char* name = "lm_gauss2d";
#endif
    std::printf("{\"peer\": \"%s\", \"replicas\": %ld, \"cpu_s\": %.4f, \"fits_per_cpu_s\": %.1f, "
                "\"mean_iterations\": %.3f, \"mean_u\": %.5f}\n",
                name, replicas, cpu, static_cast<double>(replicas) / cpu,
                static_cast<double>(iterations) / static_cast<double>(replicas),
                checksum / static_cast<double>(replicas));
    return 0;
}
