// SPDX-License-Identifier: MIT
#pragma once

#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include "src/io/h5.hpp"

/**
 * What reconstruction files need beyond src/io/h5.hpp (internal): N-dimensional float32
 * datasets read and written in blocks of leading-axis rows (hyperslabs, so a rank reads only its
 * share of the patterns), and complex datasets stored the way h5py and PtyRAD store them: a
 * compound of two floats named "r" and "i" (complex64; read also from complex128). Every call
 * goes through EF_H5_CHECK and H5Handle like the rest of the HDF5 code.
 */
namespace ef::recon::h5x {

/// Creates an N-d float32 dataset (replacing an existing one). `chunk_rows` > 0 chunks it along
/// the first axis with shuffle + deflate level `deflate` (0 = no compression).
void create_float(h5::File& f, const std::string& name, const std::vector<std::uint64_t>& dims,
                  std::uint64_t chunk_rows = 0, int deflate = 0);
/// Writes rows [first, first + count) of the first axis.
void write_float_rows(h5::File& f, const std::string& name, std::uint64_t first, std::uint64_t count,
                      const float* data);
/// Reads rows [first, first + count) of the first axis, converting any numeric type to float.
void read_float_rows(const h5::File& f, const std::string& name, std::uint64_t first, std::uint64_t count,
                     float* out);

/// Writes a complex64 dataset of shape `dims` (replacing an existing one).
void write_complex(h5::File& f, const std::string& name, const std::vector<std::uint64_t>& dims,
                   const std::vector<std::complex<double>>& data);
/// Reads a complex (compound r/i) dataset; `dims` receives its shape.
std::vector<std::complex<double>> read_complex(const h5::File& f, const std::string& name,
                                               std::vector<std::uint64_t>& dims);
/// Writes a double dataset of any shape (replacing an existing one).
void write_double(h5::File& f, const std::string& name, const std::vector<std::uint64_t>& dims,
                  const std::vector<double>& data);
/// Removes `name` if it exists.
void remove(h5::File& f, const std::string& name);
/// True when the dataset's element type is a compound (a complex dataset).
bool is_compound(const h5::File& f, const std::string& name);

}  // namespace ef::recon::h5x
