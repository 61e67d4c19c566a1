// SPDX-License-Identifier: MIT
// GPU peer of `ensemblefit fit inputs/spot.ini --run.workers gpu --fit.solver normal
// --fit.precision float` (issue #35, "One GPU, whole process"): the minimal program that makes the
// same number of smeared replicas on the GPU, fits them with a batched Levenberg-Marquardt and
// writes the parameters to a file. The time of its whole command is what ensemblefit's whole
// command is held against (perf/multigpu/issue35.sh, section spot1).
//
//   peer_spot_minimal SPOT.csv REPLICAS OUT.bin [TOLERANCE [SEED]]   -> one JSON line on stdout
//   peer_spot_minimal --check SPOT.csv [REPLICAS]                     GPU against the host, same replicas
//
// What it does, and nothing else: reads SPOT.csv (px,py,counts,sigma; at most 256 points), puts
// the points in __constant__ memory, and runs one kernel with one thread per replica: the
// thread draws its replica's smeared counts y_i + sigma_i z_i (Philox4x32-10 keyed by (seed,
// replica), counter = point index / 4: four uniforms, Box-Muller with sin and cos, four normals
// per call; replicas 1..REPLICAS, as ensemblefit's smeared ones) into its local memory and fits
// the 2-D Gaussian on a constant from the config's start values with perf/peers/lm_gauss2d.cpp's
// LM (float, analytic derivatives, A + lambda diag(A) by Cholesky, lambda x10 on a worse trial
// and /10 on a better one, stop when an accepted step lowers chi^2 by less than TOLERANCE
// relative (default 1e-4), at most 20 iterations; no bounds). On the host, against
// lm_gauss2d.cpp's own fit() on the same 20,000 replicas, it gave the same iteration count for
// 99.2 % and parameters within 2.4e-4 relative (the operations' order differs). Parameters, chi^2
// and status are copied back (pinned memory) and written with fwrite + fsync; rank-free, MPI-free,
// HDF5-free, so it runs from the .gpu-run bundle (the CUDA runtime linked statically).
//
// OUT.bin (little-endian): 8 bytes "EFSPOTM1", uint64 R, uint32 P = 5, uint32 0; then five
// columns of R float32 (a, u, v, s, c), R float32 chi^2, R int8 status (0 converged, 1 at 20
// iterations, 2 failed: singular or non-finite), the layout the kernel writes (coalesced). OUT.bin
// must not exist (a run never replaces a file). The JSON line: replicas, converged, finished
// (not failed), mean iterations, mean and standard deviation of each parameter over the finished
// replicas (Summary below says why not only the converged ones), and seconds of each phase:
// init (CUDA context, reading the CSV, allocations), generate_fit (the kernel), copy (device to
// host), write (to the file, fsync'ed and closed), summary (the means, on the host) and process
// (main's entry to the JSON line; the runner times the whole command).
//
// --check fits REPLICAS (default 1000) replicas on the GPU and the same replicas with the same
// functions on the host, and compares them: exit 0 when at least 99 % of the replicas agree to
// 1e-3 relative in every parameter (float rounding and expf's last bits differ between the two,
// and an LM path that flips a tolerance test now and then), 1 when not.
//
// Built without nvcc (g++ -std=c++20 -x c++: the CMake build does not, perf/multigpu/
// issue35.sh's REHEARSE=1 does), the same program runs the same functions on the host, one
// thread: a check of the algorithm and of the file and JSON on a machine without a GPU, not a
// figure to compare.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#ifdef __CUDACC__
#include <cuda_runtime.h>
#define PEER_HD __host__ __device__ __forceinline__
#else
#define PEER_HD inline
#endif

#include <Random123/philox.h>

namespace {

constexpr int kP = 5;            // a, u, v, s, c: c + a exp(-((px-u)^2 + (py-v)^2) / (2 s^2))
constexpr int kMaxPoints = 256;  // the points live in __constant__ memory and each thread's y in local
constexpr int kTri = kP * (kP + 1) / 2;
constexpr int kMaxIterations = 20;

/// The spot's points: what every replica shares.
struct SpotData {
    int n;
    float x0[kMaxPoints], x1[kMaxPoints], y[kMaxPoints], sigma[kMaxPoints], w[kMaxPoints];  // w = 1 / sigma^2
};

/// One replica's result, as the kernel stores it.
struct FitResult {
    float p[kP];
    float chi2;
    int status;  // 0 converged, 1 max iterations, 2 failed
    int iterations;
};

PEER_HD int tri(int a, int b) { return a * (a + 1) / 2 + b; }

PEER_HD float model_exp(float v) { return expf(v); }

using std::isfinite;

PEER_HD void sincos_2pi(float u, float* s, float* c) {
#ifdef __CUDA_ARCH__
    sincospif(2.0f * u, s, c);
#else
    *s = std::sin(6.2831853f * u);
    *c = std::cos(6.2831853f * u);
#endif
}

/// Replica r's smeared counts y_i + sigma_i z_i into y (Philox4x32-10 keyed by (seed, r)).
PEER_HD void smear(const SpotData& s, std::uint32_t seed, std::uint64_t replica, float* y) {
    using Philox = r123::Philox4x32_R<10>;
    const Philox::key_type key = {{seed, static_cast<std::uint32_t>(replica)}};  // replicas < 2^31
    Philox gen;
    for (int i = 0; i < s.n; i += 4) {
        const Philox::ctr_type ctr = {{static_cast<std::uint32_t>(i / 4), 0x736d6561u, 0, 0}};  // "smea"
        const Philox::ctr_type b = gen(ctr, key);
        float z[4];
        for (int h = 0; h < 2; ++h) {
            const float u1 = (static_cast<float>(b.v[2 * h] >> 8) + 1.0f) * 0x1.0p-24f;  // (0, 1]
            const float u2 = static_cast<float>(b.v[2 * h + 1] >> 8) * 0x1.0p-24f;       // [0, 1)
            const float r = sqrtf(-2.0f * logf(u1));
            float sn, cs;
            sincos_2pi(u2, &sn, &cs);
            z[2 * h] = r * cs;
            z[2 * h + 1] = r * sn;
        }
        for (int k = 0; k < 4 && i + k < s.n; ++k) y[i + k] = s.y[i + k] + s.sigma[i + k] * z[k];
    }
}

/// chi^2 at p; with A (packed lower triangle of J^T W J) and g (J^T W r) when `jacobian`.
PEER_HD float evaluate(const SpotData& s, const float* y, const float* p, bool jacobian, float* A, float* g) {
    float a_sum[kTri] = {}, g_sum[kP] = {};
    float chi2 = 0;
    const float inv2s2 = 1.0f / (2.0f * p[3] * p[3]);
    for (int i = 0; i < s.n; ++i) {
        const float du = s.x0[i] - p[1], dv = s.x1[i] - p[2];
        const float r2 = du * du + dv * dv;
        const float e = model_exp(-r2 * inv2s2);
        const float r = y[i] - (p[0] * e + p[4]);
        const float w = s.w[i];
        chi2 += w * r * r;
        if (!jacobian) continue;
        const float ae = p[0] * e * 2 * inv2s2;
        const float j[kP] = {e, ae * du, ae * dv, ae * r2 / p[3], 1.0f};
        for (int a = 0; a < kP; ++a) {
            g_sum[a] += w * j[a] * r;
            for (int b = 0; b <= a; ++b) a_sum[tri(a, b)] += w * j[a] * j[b];
        }
    }
    if (jacobian) {
        for (int k = 0; k < kTri; ++k) A[k] = a_sum[k];
        for (int k = 0; k < kP; ++k) g[k] = g_sum[k];
    }
    return chi2;
}

/// Solves (A + lambda diag A) d = g by Cholesky; false if not positive definite.
PEER_HD bool solve(const float* A, const float* g, float lambda, float* d) {
    float L[kTri];
    for (int a = 0; a < kP; ++a)
        for (int b = 0; b <= a; ++b) L[tri(a, b)] = A[tri(a, b)] * (a == b ? 1 + lambda : 1);
    for (int j = 0; j < kP; ++j) {
        float t = L[tri(j, j)];
        for (int k = 0; k < j; ++k) t -= L[tri(j, k)] * L[tri(j, k)];
        if (!(t > 0)) return false;
        L[tri(j, j)] = sqrtf(t);
        for (int i = j + 1; i < kP; ++i) {
            float u = L[tri(i, j)];
            for (int k = 0; k < j; ++k) u -= L[tri(i, k)] * L[tri(j, k)];
            L[tri(i, j)] = u / L[tri(j, j)];
        }
    }
    float z[kP];
    for (int i = 0; i < kP; ++i) {
        float t = g[i];
        for (int k = 0; k < i; ++k) t -= L[tri(i, k)] * z[k];
        z[i] = t / L[tri(i, i)];
    }
    for (int i = kP - 1; i >= 0; --i) {
        float t = z[i];
        for (int k = i + 1; k < kP; ++k) t -= L[tri(k, i)] * d[k];
        d[i] = t / L[tri(i, i)];
    }
    return true;
}

/// Replica `replica`'s smear and fit: lm_gauss2d.cpp's LM, with a status.
PEER_HD FitResult fit_replica(const SpotData& s, std::uint32_t seed, std::uint64_t replica, float tolerance) {
    float y[kMaxPoints];
    smear(s, seed, replica, y);
    FitResult res;
    float* p = res.p;
    const float start[kP] = {80, 7, 7, 2.5f, 5};  // inputs/spot.ini's start values
    for (int k = 0; k < kP; ++k) p[k] = start[k];
    float A[kTri], g[kP], d[kP], trial[kP];
    float lambda = 1e-3f;
    float chi2 = evaluate(s, y, p, true, A, g);
    res.status = isfinite(chi2) ? 1 : 2;
    res.iterations = 0;
    for (int it = 1; it <= kMaxIterations && res.status == 1; ++it) {
        res.iterations = it;
        if (!solve(A, g, lambda, d)) {
            res.status = 2;
            break;
        }
        for (int k = 0; k < kP; ++k) trial[k] = p[k] + d[k];
        const float c = evaluate(s, y, trial, false, nullptr, nullptr);
        if (c < chi2) {
            const bool done = (chi2 - c) / chi2 < tolerance;
            for (int k = 0; k < kP; ++k) p[k] = trial[k];
            chi2 = evaluate(s, y, p, true, A, g);
            lambda *= 0.1f;
            if (done) res.status = 0;
        } else {
            lambda *= 10.0f;
        }
    }
    res.chi2 = chi2;
    return res;
}

/// One run's results, in the file's column layout.
struct Results {
    std::int64_t replicas = 0;
    float* params = nullptr;  // kP columns of `replicas`
    float* chi2 = nullptr;
    std::int8_t* status = nullptr;
    std::uint64_t iterations = 0;
};

PEER_HD void store(const FitResult& f, std::int64_t r, std::int64_t replicas, float* params, float* chi2,
                   std::int8_t* status) {
    for (int k = 0; k < kP; ++k) params[k * replicas + r] = f.p[k];
    chi2[r] = f.chi2;
    status[r] = static_cast<std::int8_t>(f.status);
}

[[noreturn]] void fail(int code, const std::string& message) {
    std::fprintf(stderr, "peer_spot_minimal: %s\n", message.c_str());
    std::exit(code);
}

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// SPOT.csv: the header px,py,counts,sigma, then one point per line (exit 3 naming file and line).
SpotData read_spot(const char* path) {
    std::ifstream in(path);
    if (!in) fail(3, std::string(path) + ": cannot open: " + std::strerror(errno));
    SpotData s{};
    std::string line;
    if (!std::getline(in, line) || line.rfind("px,py,counts,sigma", 0) != 0)
        fail(3, std::string(path) + ": line 1: expected the header px,py,counts,sigma");
    for (int number = 2; std::getline(in, line); ++number) {
        if (line.empty() || line == "\r") continue;
        const std::string where = std::string(path) + ": line " + std::to_string(number);
        if (s.n == kMaxPoints) fail(3, where + ": more than " + std::to_string(kMaxPoints) + " points");
        float v[4];
        const char* c = line.c_str();
        for (int k = 0; k < 4; ++k) {
            char* end = nullptr;
            v[k] = std::strtof(c, &end);
            if (end == c || !std::isfinite(v[k]))
                fail(3, where + ": column " + std::to_string(k + 1) + " is not a number");
            c = end;
            while (*c == ' ' || *c == '\r') ++c;
            if (k < 3 && *c++ != ',') fail(3, where + ": expected 4 comma-separated numbers");
        }
        if (*c != '\0') fail(3, where + ": expected 4 comma-separated numbers");
        if (!(v[3] > 0)) fail(3, where + ": sigma must be positive");
        s.x0[s.n] = v[0];
        s.x1[s.n] = v[1];
        s.y[s.n] = v[2];
        s.sigma[s.n] = v[3];
        s.w[s.n] = 1.0f / (v[3] * v[3]);
        ++s.n;
    }
    if (s.n < kP) fail(3, std::string(path) + ": " + std::to_string(s.n) + " points, fewer than the 5 parameters");
    return s;
}

/// The file: header, then the columns; fsync'ed and closed (exit 2 if it exists, 3 if writing fails).
void write_results(const char* path, const Results& res) {
    const int fd = ::open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 && errno == EEXIST) fail(2, std::string(path) + ": exists; a run never replaces a file (remove it)");
    if (fd < 0) fail(3, std::string(path) + ": cannot create: " + std::strerror(errno));
    FILE* f = ::fdopen(fd, "wb");
    if (f == nullptr) fail(3, std::string(path) + ": " + std::strerror(errno));
    const auto n = static_cast<std::size_t>(res.replicas);
    const std::uint64_t r = static_cast<std::uint64_t>(res.replicas);
    const std::uint32_t dims[2] = {kP, 0};
    bool ok = std::fwrite("EFSPOTM1", 1, 8, f) == 8 && std::fwrite(&r, sizeof r, 1, f) == 1 &&
              std::fwrite(dims, sizeof dims, 1, f) == 1 &&
              std::fwrite(res.params, sizeof(float), kP * n, f) == kP * n &&
              std::fwrite(res.chi2, sizeof(float), n, f) == n && std::fwrite(res.status, 1, n, f) == n;
    ok = std::fflush(f) == 0 && ok;
    ok = ::fsync(fd) == 0 && ok;
    const int err = errno;
    ok = std::fclose(f) == 0 && ok;
    if (!ok) fail(3, std::string(path) + ": writing failed: " + std::strerror(err));
}

/// The JSON line's statistics: the converged and the finished (not failed) replicas, and the mean
/// and standard deviation of each parameter over the finished ones. lm_gauss2d's 20-iteration stop
/// is reached mostly by replicas already at their minimum, whose float chi^2 no longer resolves a
/// better trial (on ensemblefit's own replicas, 2e5 on the host, they lay within 0.003 standard
/// deviations of ensemblefit's fits, the converged ones too): leaving them out would bias the means.
struct Summary {
    std::int64_t converged = 0, finished = 0;
    double mean[kP] = {}, sdev[kP] = {};
};

Summary summarize(const Results& res) {
    Summary s;
    double sum[kP] = {}, sum2[kP] = {};
    for (std::int64_t r = 0; r < res.replicas; ++r) {
        if (res.status[r] == 2) continue;
        s.converged += res.status[r] == 0 ? 1 : 0;
        ++s.finished;
        for (int k = 0; k < kP; ++k) {
            const double v = res.params[k * res.replicas + r];
            sum[k] += v;
            sum2[k] += v * v;
        }
    }
    const double n = static_cast<double>(s.finished);
    for (int k = 0; k < kP; ++k) {
        s.mean[k] = n > 0 ? sum[k] / n : NAN;
        s.sdev[k] = n > 1 ? std::sqrt(std::max(0.0, (sum2[k] - n * s.mean[k] * s.mean[k]) / (n - 1))) : NAN;
    }
    return s;
}

void fit_on_host(const SpotData& s, std::uint32_t seed, float tolerance, const Results& res, std::uint64_t* iterations) {
    for (std::int64_t r = 0; r < res.replicas; ++r) {
        const FitResult f = fit_replica(s, seed, static_cast<std::uint64_t>(r) + 1, tolerance);
        store(f, r, res.replicas, res.params, res.chi2, res.status);
        *iterations += static_cast<std::uint64_t>(f.iterations);
    }
}

#ifdef __CUDACC__
__constant__ SpotData c_spot;

void cuda_check(cudaError_t e, const char* call, int line) {
    if (e == cudaSuccess) return;
    fail(e == cudaErrorMemoryAllocation ? 3 : 1,
         std::string(call) + " (spot_minimal.cu:" + std::to_string(line) + "): " + cudaGetErrorString(e));
}
#define PEER_CUDA(call) cuda_check((call), #call, __LINE__)

/// One thread per replica: smear, fit, store; the block's iterations summed into *iterations.
__global__ void __launch_bounds__(256) fit_kernel(std::int64_t replicas, std::uint32_t seed, float tolerance,
                                                  float* params, float* chi2, std::int8_t* status,
                                                  unsigned long long* iterations) {
    const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    unsigned it = 0;
    if (r < replicas) {
        const FitResult f = fit_replica(c_spot, seed, static_cast<std::uint64_t>(r) + 1, tolerance);
        store(f, r, replicas, params, chi2, status);
        it = static_cast<unsigned>(f.iterations);
    }
    it = __reduce_add_sync(0xffffffffu, it);
    if ((threadIdx.x & 31) == 0 && it != 0) atomicAdd(iterations, static_cast<unsigned long long>(it));
}

/// Device buffers and pinned host copies of one run's results.
struct DeviceRun {
    Results dev, host;
    unsigned long long* iterations = nullptr;

    explicit DeviceRun(std::int64_t replicas) {
        const auto n = static_cast<std::size_t>(replicas);
        dev.replicas = host.replicas = replicas;
        PEER_CUDA(cudaMalloc(&dev.params, kP * n * sizeof(float)));
        PEER_CUDA(cudaMalloc(&dev.chi2, n * sizeof(float)));
        PEER_CUDA(cudaMalloc(&dev.status, n));
        PEER_CUDA(cudaMalloc(&iterations, sizeof(unsigned long long)));
        PEER_CUDA(cudaMallocHost(&host.params, kP * n * sizeof(float)));
        PEER_CUDA(cudaMallocHost(&host.chi2, n * sizeof(float)));
        PEER_CUDA(cudaMallocHost(&host.status, n));
    }
    DeviceRun(const DeviceRun&) = delete;
    DeviceRun& operator=(const DeviceRun&) = delete;
    ~DeviceRun() {
        cudaFree(dev.params);
        cudaFree(dev.chi2);
        cudaFree(dev.status);
        cudaFree(iterations);
        cudaFreeHost(host.params);
        cudaFreeHost(host.chi2);
        cudaFreeHost(host.status);
    }

    void fit(std::uint32_t seed, float tolerance) {
        PEER_CUDA(cudaMemset(iterations, 0, sizeof(unsigned long long)));
        const auto blocks = static_cast<unsigned>((dev.replicas + 255) / 256);
        fit_kernel<<<blocks, 256>>>(dev.replicas, seed, tolerance, dev.params, dev.chi2, dev.status, iterations);
        PEER_CUDA(cudaGetLastError());
        PEER_CUDA(cudaDeviceSynchronize());
    }

    void copy_back() {
        const auto n = static_cast<std::size_t>(dev.replicas);
        PEER_CUDA(cudaMemcpy(host.params, dev.params, kP * n * sizeof(float), cudaMemcpyDeviceToHost));
        PEER_CUDA(cudaMemcpy(host.chi2, dev.chi2, n * sizeof(float), cudaMemcpyDeviceToHost));
        PEER_CUDA(cudaMemcpy(host.status, dev.status, n, cudaMemcpyDeviceToHost));
        PEER_CUDA(cudaMemcpy(&host.iterations, iterations, sizeof host.iterations, cudaMemcpyDeviceToHost));
    }
};

/// --check: the GPU's results against the host's on the same replicas.
int check(const SpotData& spot, std::int64_t replicas) {
    constexpr std::uint32_t kSeed = 7;
    constexpr float kTolerance = 1e-4f;
    DeviceRun run(replicas);
    run.fit(kSeed, kTolerance);
    run.copy_back();
    const auto n = static_cast<std::size_t>(replicas);
    std::vector<float> params(kP * n), chi2(n);
    std::vector<std::int8_t> status(n);
    Results ref{replicas, params.data(), chi2.data(), status.data(), 0};
    fit_on_host(spot, kSeed, kTolerance, ref, &ref.iterations);
    std::int64_t agree = 0, same_status = 0;
    double worst = 0;
    for (std::int64_t r = 0; r < replicas; ++r) {
        double d = 0;
        for (int k = 0; k < kP; ++k) {
            const double a = run.host.params[k * replicas + r], b = params[k * n + r];
            d = std::max(d, std::fabs(a - b) / std::max(1e-3, std::fabs(b)));
        }
        worst = std::max(worst, d);
        agree += d <= 1e-3 ? 1 : 0;
        same_status += run.host.status[r] == status[r] ? 1 : 0;
    }
    const Summary gpu = summarize(run.host), host = summarize(ref);
    std::printf("{\"check\": \"gpu vs host\", \"replicas\": %lld, \"agree_1e-3\": %lld, \"same_status\": %lld, "
                "\"worst_relative\": %.3e, \"iterations_gpu\": %llu, \"iterations_host\": %llu, "
                "\"mean_u_gpu\": %.6f, \"mean_u_host\": %.6f}\n",
                static_cast<long long>(replicas), static_cast<long long>(agree), static_cast<long long>(same_status),
                worst, static_cast<unsigned long long>(run.host.iterations),
                static_cast<unsigned long long>(ref.iterations), gpu.mean[1], host.mean[1]);
    return agree * 100 >= replicas * 99 ? 0 : 1;
}
#endif

}  // namespace

int main(int argc, char** argv) {
    const double t_start = now();
    const char* usage =
        "usage: peer_spot_minimal SPOT.csv REPLICAS OUT.bin [TOLERANCE [SEED]]\n"
        "       peer_spot_minimal --check SPOT.csv [REPLICAS]";
    auto count = [&](const char* text) {
        char* end = nullptr;
        const long long v = std::strtoll(text, &end, 10);
        if (end == text || *end != '\0' || v < 1 || v > (1LL << 31) - 1)
            fail(2, std::string("REPLICAS: '") + text + "' is not a count from 1 to 2^31 - 1\n" + usage);
        return static_cast<std::int64_t>(v);
    };
    if (argc >= 3 && std::strcmp(argv[1], "--check") == 0) {
        if (argc > 4) fail(2, usage);
#ifdef __CUDACC__
        const SpotData spot = read_spot(argv[2]);
        PEER_CUDA(cudaMemcpyToSymbol(c_spot, &spot, sizeof spot));
        return check(spot, argc > 3 ? count(argv[3]) : 1000);
#else
        fail(2, "--check compares the GPU with the host: this build has no GPU code (build it with nvcc)");
#endif
    }
    if (argc < 4 || argc > 6) fail(2, usage);
    const std::int64_t replicas = count(argv[2]);
    const char* out = argv[3];
    char* end = nullptr;
    const float tolerance = argc > 4 ? std::strtof(argv[4], &end) : 1e-4f;
    if (argc > 4 && (*end != '\0' || !(tolerance > 0 && tolerance < 1)))
        fail(2, std::string("TOLERANCE: '") + argv[4] + "' is not a number in (0, 1)");
    const long long seed = argc > 5 ? std::strtoll(argv[5], &end, 10) : 7;
    if (argc > 5 && (*end != '\0' || seed < 0 || seed > 0xffffffffLL))
        fail(2, std::string("SEED: '") + argv[5] + "' is not an integer from 0 to 2^32 - 1");
    if (::access(out, F_OK) == 0) fail(2, std::string(out) + ": exists; a run never replaces a file (remove it)");

    // init: the device's context, the points, the buffers
#ifdef __CUDACC__
    PEER_CUDA(cudaFree(nullptr));
#endif
    const SpotData spot = read_spot(argv[1]);
#ifdef __CUDACC__
    PEER_CUDA(cudaMemcpyToSymbol(c_spot, &spot, sizeof spot));
    DeviceRun run(replicas);
    const Results& res = run.host;
    const char* device = "gpu";
#else
    const auto n = static_cast<std::size_t>(replicas);
    std::vector<float> params(kP * n), chi2(n);
    std::vector<std::int8_t> status(n);
    Results host{replicas, params.data(), chi2.data(), status.data(), 0};
    const Results& res = host;
    const char* device = "host (reference build: not a figure to compare)";
#endif
    const double t_init = now();
#ifdef __CUDACC__
    run.fit(static_cast<std::uint32_t>(seed), tolerance);
    const double t_fit = now();
    run.copy_back();
#else
    fit_on_host(spot, static_cast<std::uint32_t>(seed), tolerance, host, &host.iterations);
    const double t_fit = now();
#endif
    const double t_copy = now();
    write_results(out, res);
    const double t_write = now();
    const Summary sum = summarize(res);
    const double t_end = now();
    std::printf("{\"peer\": \"spot_minimal\", \"device\": \"%s\", \"replicas\": %lld, \"converged\": %lld, "
                "\"finished\": %lld, \"mean_iterations\": %.4f, \"mean\": [%.7g, %.7g, %.7g, %.7g, %.7g], "
                "\"std\": [%.7g, %.7g, %.7g, %.7g, %.7g], \"init_s\": %.4f, \"generate_fit_s\": %.4f, "
                "\"copy_s\": %.4f, \"write_s\": %.4f, \"summary_s\": %.4f, \"process_s\": %.4f}\n",
                device, static_cast<long long>(replicas), static_cast<long long>(sum.converged),
                static_cast<long long>(sum.finished),
                static_cast<double>(res.iterations) / static_cast<double>(replicas), sum.mean[0], sum.mean[1],
                sum.mean[2], sum.mean[3], sum.mean[4], sum.sdev[0], sum.sdev[1], sum.sdev[2], sum.sdev[3], sum.sdev[4],
                t_init - t_start, t_fit - t_init, t_copy - t_fit, t_write - t_copy, t_end - t_write, t_end - t_start);
    return 0;
}
