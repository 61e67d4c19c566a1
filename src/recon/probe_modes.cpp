// SPDX-License-Identifier: MIT
#include "src/recon/probe_modes.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ef::recon {

namespace {
std::vector<Complex> inverse_unitary_dft(const std::vector<Complex>& spec, int h, int w);
}  // namespace


void hermitian_eigen(const std::vector<Complex>& matrix, int k, std::vector<double>& values, std::vector<Complex>& vectors) {
    const size_t K = static_cast<size_t>(k);
    std::vector<Complex> a = matrix;
    std::vector<Complex> v(K * K, 0.0);
    for (size_t i = 0; i < K; ++i) v[i * K + i] = 1.0;
    auto at = [&](size_t r, size_t c) -> Complex& { return a[r * K + c]; };
    double scale = 0;
    for (const Complex& z : a) scale = std::max(scale, std::abs(z));
    for (int sweep = 0; sweep < 100 && scale > 0; ++sweep) {
        double off = 0;
        for (size_t p = 0; p < K; ++p)
            for (size_t q = p + 1; q < K; ++q) off += std::norm(at(p, q));
        if (std::sqrt(off) <= 1e-15 * scale) break;
        for (size_t p = 0; p < K; ++p)
            for (size_t q = p + 1; q < K; ++q) {
                const double g = std::abs(at(p, q));
                if (g <= 1e-300) continue;
                // J = D R: D = diag(1 at p, e^{-i phi} at q) makes the pivot real, R the real
                // Jacobi rotation that zeroes it (Numerical Recipes' jacobi convention).
                const Complex phase = std::conj(at(p, q)) / g;  // e^{-i phi}
                const double ap = at(p, p).real(), aq = at(q, q).real();
                const double theta = (aq - ap) / (2 * g);
                const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1));
                const double c = 1 / std::sqrt(t * t + 1), s = t * c;
                const Complex jpp = c, jpq = s, jqp = -s * phase, jqq = c * phase;
                for (size_t r = 0; r < K; ++r) {  // A <- A J (columns p, q)
                    const Complex x = at(r, p), y = at(r, q);
                    at(r, p) = x * jpp + y * jqp;
                    at(r, q) = x * jpq + y * jqq;
                }
                for (size_t cidx = 0; cidx < K; ++cidx) {  // A <- J^H A (rows p, q)
                    const Complex x = at(p, cidx), y = at(q, cidx);
                    at(p, cidx) = std::conj(jpp) * x + std::conj(jqp) * y;
                    at(q, cidx) = std::conj(jpq) * x + std::conj(jqq) * y;
                }
                at(p, q) = 0;
                at(q, p) = 0;
                for (size_t r = 0; r < K; ++r) {  // V <- V J
                    const Complex x = v[r * K + p], y = v[r * K + q];
                    v[r * K + p] = x * jpp + y * jqp;
                    v[r * K + q] = x * jpq + y * jqq;
                }
            }
    }
    std::vector<size_t> order(K);
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return at(x, x).real() > at(y, y).real(); });
    values.assign(K, 0.0);
    vectors.assign(K * K, 0.0);
    for (size_t m = 0; m < K; ++m) {
        values[m] = at(order[m], order[m]).real();
        for (size_t r = 0; r < K; ++r) vectors[r * K + m] = v[r * K + order[m]];
    }
}

std::vector<double> orthogonalize_modes(std::vector<Complex>& probe, int modes, std::int64_t n) {
    const size_t K = static_cast<size_t>(modes), N = static_cast<size_t>(n);
    std::vector<Complex> gram(K * K, 0.0);
    for (size_t k = 0; k < K; ++k)
        for (size_t l = k; l < K; ++l) {
            Complex s = 0;
            for (size_t q = 0; q < N; ++q) s += std::conj(probe[k * N + q]) * probe[l * N + q];
            gram[k * K + l] = s;
            gram[l * K + k] = std::conj(s);
        }
    std::vector<double> values;
    std::vector<Complex> vec;
    hermitian_eigen(gram, modes, values, vec);
    std::vector<Complex> out(K * N, 0.0);
    for (size_t m = 0; m < K; ++m)
        for (size_t l = 0; l < K; ++l) {
            const Complex c = vec[l * K + m];
            for (size_t q = 0; q < N; ++q) out[m * N + q] += c * probe[l * N + q];
        }
    probe.swap(out);
    return values;
}

double scale_probe_power(std::vector<Complex>& probe, double target) {
    double power = 0;
    for (const Complex& z : probe) power += std::norm(z);
    if (!(power > 0) || !(target > 0)) return 1.0;
    const double f = std::sqrt(target / power);
    for (Complex& z : probe) z *= f;
    return f;
}

double bright_disc_radius(const std::vector<double>& mean, int h, int w) {
    const size_t n = static_cast<size_t>(h) * static_cast<size_t>(w);
    double peak = 0;
    for (size_t q = 0; q < n; ++q) peak = std::max(peak, mean[q]);
    size_t bright = 0;
    for (size_t q = 0; q < n; ++q) bright += mean[q] > 0.5 * peak ? 1 : 0;
    return std::max(1.0, std::sqrt(static_cast<double>(bright) / M_PI));
}

std::vector<Complex> probe_from_mean_pattern(const std::vector<double>& mean, int h, int w, double defocus,
                                             double disc) {
    // P = F_ortho^-1[sqrt(mean) e^{i defocus (k/disc)^2} e^{-2 pi i (fy h/2 + fx w/2)}] (the
    // centring phase in the same polar() as ever, so the same bits).
    const size_t n = static_cast<size_t>(h) * static_cast<size_t>(w);
    std::vector<Complex> spec(n);
    for (int u = 0; u < h; ++u)
        for (int v = 0; v < w; ++v) {
            const double fy = static_cast<double>(u <= (h - 1) / 2 ? u : u - h) / h;
            const double fx = static_cast<double>(v <= (w - 1) / 2 ? v : v - w) / w;
            const double amp = std::sqrt(std::max(0.0, mean[static_cast<size_t>(u) * w + v]));
            const double k2 = (fy * h) * (fy * h) + (fx * w) * (fx * w);  // pattern pixels squared
            spec[static_cast<size_t>(u) * w + v] =
                std::polar(amp, defocus * k2 / (disc * disc) - 2 * M_PI * (fy * (h / 2) + fx * (w / 2)));
        }
    return inverse_unitary_dft(spec, h, w);
}

std::vector<Complex> probe_from_spectrum(std::vector<Complex> spec, int h, int w) {
    for (int u = 0; u < h; ++u)
        for (int v = 0; v < w; ++v) {
            const double fy = static_cast<double>(u <= (h - 1) / 2 ? u : u - h) / h;
            const double fx = static_cast<double>(v <= (w - 1) / 2 ? v : v - w) / w;
            spec[static_cast<size_t>(u) * w + v] *= std::polar(1.0, -2 * M_PI * (fy * (h / 2) + fx * (w / 2)));
        }
    return inverse_unitary_dft(spec, h, w);
}

namespace {

/// F_ortho^-1 of `spec` (h x w, FFT order) by a direct sum: fine, this runs once per probe.
std::vector<Complex> inverse_unitary_dft(const std::vector<Complex>& spec, int h, int w) {
    const size_t n = static_cast<size_t>(h) * static_cast<size_t>(w);
    // Separable inverse DFT, rows then columns, scaled by 1/sqrt(n). The twiddles are tabled
    // once (the same expression, so the same bits): the defocus trials build 10 probes, and
    // evaluating them in the inner loops cost 0.08 s a probe at 128 x 128.
    std::vector<Complex> twx(static_cast<size_t>(w) * w), twy(static_cast<size_t>(h) * h);
    for (int v = 0; v < w; ++v)
        for (int x = 0; x < w; ++x) twx[static_cast<size_t>(v) * w + x] = std::polar(1.0, 2 * M_PI * v * x / w);
    for (int u = 0; u < h; ++u)
        for (int y = 0; y < h; ++y) twy[static_cast<size_t>(u) * h + y] = std::polar(1.0, 2 * M_PI * u * y / h);
    std::vector<Complex> tmp(n), out(n);
    for (int u = 0; u < h; ++u)
        for (int x = 0; x < w; ++x) {
            Complex s = 0;
            for (int v = 0; v < w; ++v) s += spec[static_cast<size_t>(u) * w + v] * twx[static_cast<size_t>(v) * w + x];
            tmp[static_cast<size_t>(u) * w + x] = s;
        }
    for (int x = 0; x < w; ++x)
        for (int y = 0; y < h; ++y) {
            Complex s = 0;
            for (int u = 0; u < h; ++u) s += tmp[static_cast<size_t>(u) * w + x] * twy[static_cast<size_t>(u) * h + y];
            out[static_cast<size_t>(y) * w + x] = s / std::sqrt(static_cast<double>(n));
        }
    return out;
}

}  // namespace

void add_probe_modes(std::vector<Complex>& probe, int have, int want, int h, int w, double mode_power, double total) {
    const size_t n = static_cast<size_t>(h) * static_cast<size_t>(w);
    probe.resize(static_cast<size_t>(want) * n);
    if (want <= have) {
        probe.resize(static_cast<size_t>(want) * n);
        return;
    }
    // Centre and radius of mode 0's intensity.
    double sum = 0, cy = 0, cx = 0;
    for (size_t q = 0; q < n; ++q) {
        const double i = std::norm(probe[q]);
        sum += i;
        cy += i * static_cast<double>(q / static_cast<size_t>(w));
        cx += i * static_cast<double>(q % static_cast<size_t>(w));
    }
    if (sum <= 0) sum = 1;
    cy /= sum;
    cx /= sum;
    double r2 = 0;
    for (size_t q = 0; q < n; ++q) {
        const double dy = static_cast<double>(q / static_cast<size_t>(w)) - cy, dx = static_cast<double>(q % static_cast<size_t>(w)) - cx;
        r2 += std::norm(probe[q]) * (dy * dy + dx * dx);
    }
    const double radius = std::max(1.0, std::sqrt(r2 / sum));
    for (int k = have; k < want; ++k) {
        // Polynomials of increasing order: x, y, xy, x^2 - y^2, x^2 + y^2, x^3, y^3, ...
        const int idx = k - 1;
        for (size_t q = 0; q < n; ++q) {
            const double y = (static_cast<double>(q / static_cast<size_t>(w)) - cy) / radius;
            const double x = (static_cast<double>(q % static_cast<size_t>(w)) - cx) / radius;
            double f;
            switch (idx % 5) {
                case 0: f = x; break;
                case 1: f = y; break;
                case 2: f = x * y; break;
                case 3: f = x * x - y * y; break;
                default: f = x * x + y * y; break;
            }
            f *= std::pow(x * x + y * y + 1.0, idx / 5);
            probe[static_cast<size_t>(k) * n + q] = probe[q] * f;
        }
        // Gram-Schmidt against the modes before it.
        for (int l = 0; l < k; ++l) {
            Complex dot = 0;
            double norm = 0;
            for (size_t q = 0; q < n; ++q) {
                dot += std::conj(probe[static_cast<size_t>(l) * n + q]) * probe[static_cast<size_t>(k) * n + q];
                norm += std::norm(probe[static_cast<size_t>(l) * n + q]);
            }
            if (norm > 0)
                for (size_t q = 0; q < n; ++q) probe[static_cast<size_t>(k) * n + q] -= dot / norm * probe[static_cast<size_t>(l) * n + q];
        }
    }
    // Powers: extra modes p each, the rest to the first `have` modes in their proportions.
    const double extra = mode_power * (want - have);
    double first = 0;
    for (size_t q = 0; q < static_cast<size_t>(have) * n; ++q) first += std::norm(probe[q]);
    const double f0 = first > 0 ? std::sqrt(std::max(0.0, 1 - extra) * total / first) : 0.0;
    for (size_t q = 0; q < static_cast<size_t>(have) * n; ++q) probe[q] *= f0;
    for (int k = have; k < want; ++k) {
        double pk = 0;
        for (size_t q = 0; q < n; ++q) pk += std::norm(probe[static_cast<size_t>(k) * n + q]);
        const double fk = pk > 0 ? std::sqrt(mode_power * total / pk) : 0.0;
        for (size_t q = 0; q < n; ++q) probe[static_cast<size_t>(k) * n + q] *= fk;
    }
}

}  // namespace ef::recon
