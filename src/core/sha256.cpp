// SPDX-License-Identifier: MIT
// SHA-256 for the provenance checksums and the model plugins' identity: portable rounds, and the x86 SHA extensions.
#include "src/core/sha256.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define EF_SHA_X86 1
#endif

namespace ef {

namespace {

constexpr std::array<std::uint32_t, 64> kK = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/// The portable rounds over `blocks` blocks of 64 bytes.
void compress_portable(std::array<std::uint32_t, 8>& h, const unsigned char* p, std::size_t blocks) {
    for (; blocks > 0; --blocks, p += 64) {
        std::uint32_t w[64];
        for (int i = 0; i < 16; ++i)
            w[i] = std::uint32_t(p[4 * i]) << 24 | std::uint32_t(p[4 * i + 1]) << 16 | std::uint32_t(p[4 * i + 2]) << 8 |
                   std::uint32_t(p[4 * i + 3]);
        for (int i = 16; i < 64; ++i) {
            const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
        for (int i = 0; i < 64; ++i) {
            const std::uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                                     kK[static_cast<size_t>(i)] + w[i];
            const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            hh = g;
            g = f;
            f = e;
            e = d + t1;
            d = c;
            c = b;
            b = a;
            a = t1 + t2;
        }
        h[0] += a;
        h[1] += b;
        h[2] += c;
        h[3] += d;
        h[4] += e;
        h[5] += f;
        h[6] += g;
        h[7] += hh;
    }
}

#ifdef EF_SHA_X86
/// The same with the SHA extensions (SHA256RNDS2, SHA256MSG1/2): four rounds per step, the
/// message schedule four words at a time.
__attribute__((target("sha,sse4.1,ssse3"))) void compress_x86(std::array<std::uint32_t, 8>& h,
                                                                 const unsigned char* p, std::size_t blocks) {
    const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&h[0]));
    __m128i state1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&h[4]));
    tmp = _mm_shuffle_epi32(tmp, 0xB1);           // CDAB
    state1 = _mm_shuffle_epi32(state1, 0x1B);     // EFGH
    __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);  // ABEF
    state1 = _mm_blend_epi16(state1, tmp, 0xF0);       // CDGH
    for (; blocks > 0; --blocks, p += 64) {
        const __m128i abef = state0, cdgh = state1;
        __m128i w[4];
        for (int i = 0; i < 16; ++i) {
            __m128i& x = w[i & 3];
            if (i < 4) {
                x = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)), mask);
            } else {
                // W[t] = W[t-16] + s0(W[t-15]) + W[t-7] + s1(W[t-2]), four words at once
                const __m128i t = _mm_add_epi32(_mm_sha256msg1_epu32(x, w[(i + 1) & 3]),
                                                _mm_alignr_epi8(w[(i + 3) & 3], w[(i + 2) & 3], 4));
                x = _mm_sha256msg2_epu32(t, w[(i + 3) & 3]);
            }
            __m128i msg = _mm_add_epi32(x, _mm_loadu_si128(reinterpret_cast<const __m128i*>(&kK[static_cast<size_t>(4 * i)])));
            state1 = _mm_sha256rnds2_epu32(state1, state0, msg);
            msg = _mm_shuffle_epi32(msg, 0x0E);
            state0 = _mm_sha256rnds2_epu32(state0, state1, msg);
        }
        state0 = _mm_add_epi32(state0, abef);
        state1 = _mm_add_epi32(state1, cdgh);
    }
    tmp = _mm_shuffle_epi32(state0, 0x1B);        // FEBA
    state1 = _mm_shuffle_epi32(state1, 0xB1);     // DCHG
    state0 = _mm_blend_epi16(tmp, state1, 0xF0);  // DCBA
    state1 = _mm_alignr_epi8(state1, tmp, 8);     // HGFE
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&h[0]), state0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(&h[4]), state1);
}
#endif

}  // namespace

bool Sha256::accelerated_available() {
#ifdef EF_SHA_X86
    static const bool has = [] {
        unsigned a = 0, b = 0, c = 0, d = 0;
        if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
        const bool sse = (c & (1u << 19)) && (c & (1u << 9));  // SSE4.1, SSSE3
        if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
        return sse && (b & (1u << 29));  // SHA
    }();
    return has;
#else
    return false;
#endif
}

Sha256::Sha256(bool accelerated) : fast_(accelerated && accelerated_available()) {}

void Sha256::compress(const unsigned char* p, std::size_t blocks) {
#ifdef EF_SHA_X86
    if (fast_) return compress_x86(h_, p, blocks);
#endif
    compress_portable(h_, p, blocks);
}

void Sha256::update(const unsigned char* p, std::size_t n) {
    bytes_ += n;
    if (fill_ > 0) {  // complete the pending block first
        const std::size_t take = std::min(n, 64 - fill_);
        std::memcpy(block_.data() + fill_, p, take);
        fill_ += take;
        p += take;
        n -= take;
        if (fill_ < 64) return;
        compress(block_.data(), 1);
        fill_ = 0;
    }
    if (n >= 64) {  // whole blocks straight from the caller's buffer
        compress(p, n / 64);
        p += n / 64 * 64;
        n %= 64;
    }
    std::memcpy(block_.data(), p, n);
    fill_ = n;
}

std::string Sha256::hex() {
    const std::uint64_t bits = bytes_ * 8;
    unsigned char tail[128] = {0};
    std::memcpy(tail, block_.data(), fill_);
    tail[fill_] = 0x80;
    const std::size_t len = fill_ + 1 + 8 <= 64 ? 64 : 128;
    for (int i = 0; i < 8; ++i) tail[len - 8 + static_cast<std::size_t>(i)] = static_cast<unsigned char>(bits >> (56 - 8 * i));
    compress(tail, len / 64);
    fill_ = 0;
    char out[65];
    for (int i = 0; i < 8; ++i) std::snprintf(out + 8 * i, 9, "%08x", h_[static_cast<size_t>(i)]);
    return std::string(out, 64);
}

std::string sha256_hex(const std::string& bytes) {
    Sha256 s;
    s.update(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
    return s.hex();
}

}  // namespace ef
