// SPDX-License-Identifier: MIT
// The optimiser's defaults that follow the data (src/recon/step_defaults.hpp).
#include <catch2/catch.hpp>

#include "src/recon/step_defaults.hpp"

using ef::recon::resolve_batch_size;

TEST_CASE("auto batch size: about 16 steps per iteration within 16..256", "[recon][defaults]") {
    CHECK(resolve_batch_size(0, 1024) == 64);    // 32 x 32 scan: 16 steps
    CHECK(resolve_batch_size(0, 1000) == 63);    // ceil(1000 / 16)
    CHECK(resolve_batch_size(0, 256) == 16);     // 16 x 16 scan: 16 steps
    CHECK(resolve_batch_size(0, 100) == 16);     // the least, 7 steps
    CHECK(resolve_batch_size(0, 10) == 10);      // never more than the positions
    CHECK(resolve_batch_size(0, 16384) == 256);  // 128 x 128 scan: the most, 64 steps
    CHECK(resolve_batch_size(0, 4096) == 256);
    CHECK(resolve_batch_size(37, 16384) == 37);  // a given size is kept
}
