// SPDX-License-Identifier: MIT
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ef {

/**
 * Streaming SHA-256 (FIPS 180-4) for the provenance checksums (src/recon/provenance.hpp), the
 * model plugins' identity and the formula cache's entries (src/model): update() with
 * any pieces, then hex(). Whole blocks are compressed straight from the caller's buffer, with
 * the x86 SHA extensions where the processor has them (about 4x the portable code: a 1 GB data
 * file in well under a second instead of several), else the portable rounds. Both give the same
 * digest (tests/unit/test_provenance.cpp).
 */
class Sha256 {
   public:
    /// `accelerated`: use the SHA extensions where the processor has them (false: always the
    /// portable rounds, for tests).
    explicit Sha256(bool accelerated = true);
    void update(const unsigned char* p, std::size_t n);
    /// The digest as 64 lowercase hex digits; ends the stream.
    std::string hex();
    /// Whether this processor has the SHA extensions this class uses.
    static bool accelerated_available();

   private:
    void compress(const unsigned char* p, std::size_t blocks);

    std::array<std::uint32_t, 8> h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::array<unsigned char, 64> block_{};
    std::size_t fill_ = 0;
    std::uint64_t bytes_ = 0;
    bool fast_ = false;
};

/// The SHA-256 of `bytes` as 64 lowercase hex digits.
std::string sha256_hex(const std::string& bytes);

}  // namespace ef
