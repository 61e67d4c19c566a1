// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "src/io/h5.hpp"

/**
 * Where a result came from, written into the result file (internal): the input files with their
 * sizes and SHA-256 checksums, the data file's own attributes copied with their HDF5 types, and
 * integer vectors as integers. Used by `reconstruct` (reconstruction_output.cpp) and by
 * `simulate ptycho`; docs/reconstruction.md "Provenance" lists what is written.
 *
 * SHA-256 rather than a fast 64-bit hash: anyone can check it with `sha256sum FILE` without
 * ensemblefit, and it is the checksum data repositories (Zenodo, EMPIAR) publish. It costs one
 * read of each input, once per run (memoised), on rank 0 only: about 2 GB/s on one core with the x86
 * SHA extensions, 0.3-0.5 GB/s without (sha256.hpp), and off the critical path (prefetch_input_record).
 */
namespace ef::recon {

/// SHA-256 of `n` bytes as 64 lowercase hex digits (`accelerated` = false: the portable rounds
/// even where the processor has the SHA extensions, for tests; sha256.hpp).
std::string sha256_hex(const void* data, std::size_t n, bool accelerated = true);

/// An input file as it was when first recorded: its path, size and SHA-256 (what `sha256sum`
/// prints). Memoised by path, size and modification time, so checkpoints do not read it again.
struct InputRecord {
    std::string path;
    std::int64_t bytes = 0;
    std::string sha256;
};
InputRecord record_input(const std::string& path);

/// Starts record_input(path)'s read and checksum on a background thread and returns at once; record_input(path) then waits for it instead of reading the file itself.
/// `reconstruct` starts it on rank 0 before the iterations, so that the checksum of a large data
/// file (1 GB for the tBL-WSe2 shape: seconds) is made while they run, not after them.
void prefetch_input_record(const std::string& path);

/// Writes `<prefix>_file`, `<prefix>_bytes` (int64) and `<prefix>_sha256` as attributes of `obj`.
void write_input_record(h5::File& f, const std::string& obj, const std::string& prefix, const InputRecord& r);

/// Copies every attribute of `src_obj` in `src` onto `dst_obj` in `dst` with its own type and
/// shape (numbers stay numbers, strings stay strings); returns how many. References are left
/// out: they would point into the source file.
int copy_attributes(const h5::File& src, const std::string& src_obj, h5::File& dst, const std::string& dst_obj);

/// Text of an attribute for a person: strings as they are, numbers formatted ("1e+07",
/// "32, 32"); never the raw bytes of a number.
std::string attribute_text(const h5::File& f, const std::string& obj, const std::string& name);

/**
 * The scan's step: the median over the positions (`yx`, N x 2, y then x) of each one's distance
 * to its nearest other position (0 for fewer than 2). A raster gives its step, and so does a
 * spiral or a jittered scan, whose consecutive points (the definition before issue 38) can be
 * far apart: a Fermat spiral of step 10 gave 76. A sweep over the positions sorted by x that
 * stops once the x distance alone exceeds the nearest found: about N sqrt(N) distances for a
 * scan, never N^2 storage.
 */
double median_nearest_step(const std::vector<double>& yx);

/// A 1-D int64 attribute (shapes, counts).
void set_attr_int64s(h5::File& f, const std::string& obj, const std::string& name, const std::vector<std::int64_t>& v);

}  // namespace ef::recon
