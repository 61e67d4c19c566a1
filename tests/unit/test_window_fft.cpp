// SPDX-License-Identifier: MIT
// The window-resident 2-D FFT (kernels/recon/window_fft.hpp), run by the CPU's SerialBlock:
// against a direct DFT in long double, its slot layout, and its inverse. The GPU runs the same
// stages with one thread per job (tests/gpu/test_recon_gpu.cpp compares the two workers).
#include <algorithm>
#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/recon/window_fft.hpp"

using namespace ef::recon;

namespace {

template <class T, int N>
struct Case {
    std::vector<Cx<T>> tw = std::vector<Cx<T>>(N);
    std::vector<Cx<T>> win = std::vector<Cx<T>>(wfft::Radix<N>::kStored);
    std::vector<std::complex<long double>> x = std::vector<std::complex<long double>>(N * N);
    Case() {
        wfft::make_twiddles(N, tw.data());
        std::mt19937_64 rng(N);
        std::normal_distribution<double> g(0, 1);
        for (auto& v : x) v = {static_cast<long double>(static_cast<T>(g(rng))), static_cast<long double>(static_cast<T>(g(rng)))};
        // the pad column must not matter: fill it with garbage
        std::fill(win.begin(), win.end(), Cx<T>{T(1e30), T(-1e30)});
        for (int q = 0; q < N * N; ++q)
            win[wfft::Layout<N>::at(q)] = {static_cast<T>(x[q].real()), static_cast<T>(x[q].imag())};
    }
    /// Direct DFT at frequency (fu, fv), sign -1 (forward) or +1.
    std::complex<long double> dft(const std::vector<std::complex<long double>>& a, int fu, int fv, int sign) const {
        const long double two_pi = 6.283185307179586476925286766559L;
        std::complex<long double> acc = 0;
        for (int u = 0; u < N; ++u)
            for (int v = 0; v < N; ++v) {
                const long double ph = sign * two_pi * static_cast<long double>((fu * u + fv * v) % N) / N;
                acc += a[u * N + v] * std::complex<long double>(std::cos(ph), std::sin(ph));
            }
        return acc;
    }
};

/// Forward: slot s holds frequency freq_of_slot2(s); the max error relative to the largest value.
template <class T, int N>
double forward_error() {
    Case<T, N> c;
    wfft::forward<T, N>(wfft::SerialBlock{}, c.win.data(), c.tw.data());
    double err = 0, big = 0;
    for (int s = 0; s < N * N; s += (N == 128 ? 97 : N == 64 ? 5 : 1)) {  // a direct DFT costs n: a sample of the slots at 64 and 128
        const int f = wfft::Layout<N>::freq_of_slot2(s);
        const std::complex<long double> ref = c.dft(c.x, f / N, f % N, -1);
        const Cx<T> got = c.win[wfft::Layout<N>::at(s)];
        err = std::max(err, static_cast<double>(std::abs(std::complex<long double>(got.re, got.im) - ref)));
        big = std::max(big, static_cast<double>(std::abs(ref)));
    }
    return err / big;
}

/// Inverse of the forward: n x the input, natural order.
template <class T, int N>
double round_trip_error() {
    Case<T, N> c;
    wfft::forward<T, N>(wfft::SerialBlock{}, c.win.data(), c.tw.data());
    wfft::inverse<T, N>(wfft::SerialBlock{}, c.win.data(), c.tw.data());
    double err = 0, big = 0;
    for (int q = 0; q < N * N; ++q) {
        const Cx<T> got = c.win[wfft::Layout<N>::at(q)];
        const std::complex<long double> want = c.x[q] * static_cast<long double>(N * N);
        err = std::max(err, static_cast<double>(std::abs(std::complex<long double>(got.re, got.im) - want)));
        big = std::max(big, static_cast<double>(std::abs(want)));
    }
    return err / big;
}

/// Inverse from slot order against a direct inverse DFT.
template <class T, int N>
double inverse_error() {
    Case<T, N> c;  // c.x is taken as the spectrum, placed in slot order
    for (int s = 0; s < N * N; ++s) {
        const auto v = c.x[wfft::Layout<N>::freq_of_slot2(s)];
        c.win[wfft::Layout<N>::at(s)] = {static_cast<T>(v.real()), static_cast<T>(v.imag())};
    }
    wfft::inverse<T, N>(wfft::SerialBlock{}, c.win.data(), c.tw.data());
    double err = 0, big = 0;
    for (int q = 0; q < N * N; q += (N == 128 ? 89 : N == 64 ? 3 : 1)) {
        const std::complex<long double> ref = c.dft(c.x, q / N, q % N, 1);
        const Cx<T> got = c.win[wfft::Layout<N>::at(q)];
        err = std::max(err, static_cast<double>(std::abs(std::complex<long double>(got.re, got.im) - ref)));
        big = std::max(big, static_cast<double>(std::abs(ref)));
    }
    return err / big;
}

}  // namespace

TEST_CASE("window FFT: slot layout is a permutation and its own inverse map", "[recon][window]") {
    auto check = [](auto layout, int n) {
        using L = decltype(layout);
        std::vector<int> seen(static_cast<size_t>(n * n), 0);
        for (int s = 0; s < n * n; ++s) {
            const int f = L::freq_of_slot2(s);
            REQUIRE(f >= 0);
            REQUIRE(f < n * n);
            ++seen[static_cast<size_t>(f)];
            CHECK(L::slot_of_freq2(f) == s);
        }
        CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    };
    check(wfft::Layout<32>{}, 32);
    check(wfft::Layout<64>{}, 64);
    check(wfft::Layout<128>{}, 128);
}

TEST_CASE("window FFT = direct DFT (double)", "[recon][window]") {
    // radix-16 x 8 (128), 8 x 8 (64), 8 x 4 (32): double rounding only
    CHECK(forward_error<double, 32>() < 1e-14);
    CHECK(forward_error<double, 64>() < 1e-14);
    CHECK(forward_error<double, 128>() < 1e-14);
    CHECK(inverse_error<double, 32>() < 1e-14);
    CHECK(inverse_error<double, 64>() < 1e-14);
    CHECK(inverse_error<double, 128>() < 1e-14);
    CHECK(round_trip_error<double, 128>() < 1e-14);
}

TEST_CASE("window FFT = direct DFT (float), as accurate as an FFT should be", "[recon][window]") {
    // log2(n) stages of float rounding: a few 1e-7 of the largest value
    const double e32 = forward_error<float, 32>(), e64 = forward_error<float, 64>(), e128 = forward_error<float, 128>();
    const double i128 = inverse_error<float, 128>(), r128 = round_trip_error<float, 128>();
    INFO("float forward errors " << e32 << " " << e64 << " " << e128 << ", inverse " << i128 << ", round trip " << r128);
    CHECK(e32 < 1e-6);
    CHECK(e64 < 1e-6);
    CHECK(e128 < 1e-6);
    CHECK(i128 < 1e-6);
    CHECK(r128 < 2e-6);
}
