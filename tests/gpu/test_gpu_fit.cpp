// SPDX-License-Identifier: MIT
// GPU vs CPU on the same replicas: the CUDA worker runs the same single-source resampling and
// LM as the CPU worker (device code built without FMA contraction), so every replica ends with
// the same status, and converged parameters agree to within 1% of the ensemble's own spread.
// They do not yet agree to 1e-10 relative (issue #5's goal): CUDA's exp/log/pow differ from
// glibc's in the last bit, and poorly determined parameters amplify that to 1e-9..1e-4
// relative; the raw differences are printed. Exits 77 (skipped) where no GPU is visible.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/fit/fit_problem.hpp>
#include <ensemblefit/worker/worker.hpp>

namespace {

// The source tree: $EF_SOURCE_DIR when set (the GPU machine checks the tree out elsewhere).
const std::string kSrc = std::getenv("EF_SOURCE_DIR") ? std::getenv("EF_SOURCE_DIR") : EF_SOURCE_DIR;

struct Comparison {
    double max_rel = 0.0;
    double max_in_sigma = 0.0;  ///< largest |GPU - CPU| over the ensemble's std, converged replicas
    int status_mismatch = 0;
    int not_converged = 0;
    double cpu_s = 0, gpu_s = 0;
};

/// Fits replicas [first, last] of `pb` on both workers and compares.
Comparison compare(const ef::FitProblem& pb, std::int64_t first, std::int64_t last, int cpu_threads = 8) {
    ef::WorkUnit unit;
    for (auto r = first; r <= last; ++r) unit.replicas.push_back(r);
    ef::WorkerOptions o;
    o.threads = cpu_threads;
    o.device = 0;
    auto cpu = ef::make_worker(ef::WorkerKind::cpu, pb, o);
    auto gpu = ef::make_worker(ef::WorkerKind::gpu, pb, o);
    ef::ReplicaBlock a, b;
    auto t0 = std::chrono::steady_clock::now();
    cpu->run(unit, a);
    auto t1 = std::chrono::steady_clock::now();
    gpu->run(unit, b);
    auto t2 = std::chrono::steady_clock::now();
    Comparison c;
    c.cpu_s = std::chrono::duration<double>(t1 - t0).count();
    c.gpu_s = std::chrono::duration<double>(t2 - t1).count();
    REQUIRE(a.size() == b.size());
    const size_t P = static_cast<size_t>(a.P);
    std::vector<double> mean(P, 0.0), sd(P, 0.0);
    int used = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a.status[i] != 0) continue;
        ++used;
        for (size_t q = 0; q < P; ++q) mean[q] += a.params[i * P + q];
    }
    for (size_t q = 0; q < P; ++q) mean[q] /= std::max(1, used);
    for (size_t i = 0; i < a.size(); ++i)
        if (a.status[i] == 0)
            for (size_t q = 0; q < P; ++q) sd[q] += std::pow(a.params[i * P + q] - mean[q], 2);
    for (size_t q = 0; q < P; ++q) sd[q] = std::sqrt(sd[q] / std::max(1, used - 1));
    for (size_t i = 0; i < a.size(); ++i) {
        if (a.status[i] == 0 && b.status[i] == 0)
            for (size_t q = 0; q < P; ++q)
                if (sd[q] > 0)
                    c.max_in_sigma = std::max(c.max_in_sigma, std::fabs(a.params[i * P + q] - b.params[i * P + q]) / sd[q]);
        CHECK(a.index[i] == b.index[i]);
        if (a.status[i] != b.status[i]) ++c.status_mismatch;
        if (a.status[i] != 0) ++c.not_converged;
        for (int q = 0; q < a.P; ++q) {
            const double x = a.params[i * static_cast<size_t>(a.P) + static_cast<size_t>(q)];
            const double y = b.params[i * static_cast<size_t>(b.P) + static_cast<size_t>(q)];
            if (std::isnan(x) && std::isnan(y)) continue;
            const double rel = std::fabs(x - y) / std::max(std::fabs(x), 1e-300);
            c.max_rel = std::max(c.max_rel, x == y ? 0.0 : rel);
        }
    }
    if (first == 0) {
        REQUIRE(b.covariance.size() == a.covariance.size());
    }
    return c;
}

ef::FitProblem load(const std::string& ini, const std::vector<std::string>& overrides = {}) {
    const ef::FitConfig cfg = ef::load_fit_config(ini, overrides);
    return ef::make_fit_problem(cfg, ef::load_data(cfg));
}

}  // namespace

TEST_CASE("GPU = CPU on all 27 NIST problems, central fit and 40 bootstrap replicas", "[gpu][nist]") {
    const char* problems[] = {"Misra1a", "Chwirut2", "Chwirut1", "Lanczos3", "Gauss1", "Gauss2", "DanWood",
                              "Misra1b", "Kirby2", "Hahn1", "Nelson", "MGH17", "Lanczos1", "Lanczos2",
                              "Gauss3", "Misra1c", "Misra1d", "Roszman1", "ENSO", "MGH09", "Thurber",
                              "BoxBOD", "Rat42", "MGH10", "Eckerle4", "Rat43", "Bennett5"};
    for (const char* p : problems) {
        for (int start : {1, 2}) {
            const auto pb = load(kSrc + "/inputs/nist/" + p + ".start" + std::to_string(start) + ".ini",
                                 {"--fit.replicas=40", "--fit.resample=bootstrap"});
            const Comparison c = compare(pb, 0, 40);
            std::printf("  %-9s start %d: max rel diff %.2e (%.2e sigma), status mismatches %d, not converged %d\n",
                        p, start, c.max_rel, c.max_in_sigma, c.status_mismatch, c.not_converged);
            INFO(p << " start " << start);
            CHECK(c.status_mismatch == 0);
            CHECK(c.max_in_sigma <= 1e-2);
        }
    }
}

TEST_CASE("GPU = CPU on linear, formula and iteration-limited replicas", "[gpu]") {
    const auto pb = load(kSrc + "/inputs/example.ini", {"--fit.replicas=500"});
    const Comparison c = compare(pb, 0, 500);
    std::printf("  example (exponential) 501 fits: max rel diff %.2e (%.2e sigma)\n", c.max_rel, c.max_in_sigma);
    CHECK(c.max_in_sigma <= 1e-2);
    CHECK(c.status_mismatch == 0);

    // One iteration allowed: every replica ends at max_iterations, on both.
    const auto capped = load(kSrc + "/inputs/example.ini", {"--fit.replicas=100", "--fit.max_iterations=2"});
    const Comparison cc = compare(capped, 0, 100);
    CHECK(cc.not_converged == 101);
    CHECK(cc.status_mismatch == 0);

    // A formula model that fails (log of a negative number) on every replica.
    const auto failing = load(kSrc + "/inputs/nist/Misra1a.start2.ini",
                              {"--model.formula=b1*(1-exp(-b2*x)) + log(b2 - 1)", "--fit.replicas=10"});
    const Comparison cf = compare(failing, 0, 10);
    CHECK(cf.status_mismatch == 0);
    CHECK(cf.not_converged == 11);
}

TEST_CASE("GPU = CPU on dis-mellin replicas; timing of both", "[gpu][dis-mellin]") {
    const auto pb = load(kSrc + "/inputs/dis-mellin.ini", {"--fit.replicas=256"});
    const Comparison c = compare(pb, 0, 256, 16);
    std::printf("  dis-mellin 257 fits: CPU (16 threads) %.2f s, GPU %.2f s, max rel diff %.2e (%.2e sigma), "
                "status mismatches %d\n", c.cpu_s, c.gpu_s, c.max_rel, c.max_in_sigma, c.status_mismatch);
    CHECK(c.status_mismatch == 0);
    CHECK(c.max_in_sigma <= 1e-2);
}

int main(int argc, char** argv) {
    if (ef::cuda_device_count() == 0) {
        std::printf("no CUDA device visible: GPU tests skipped\n");
        return 77;
    }
    std::printf("device 0: %s\n", ef::cuda_device_name(0).c_str());
    return Catch::Session().run(argc, argv);
}
