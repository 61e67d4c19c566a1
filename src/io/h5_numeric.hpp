// SPDX-License-Identifier: MIT
#pragma once

#include <string>

#include "src/io/h5.hpp"

namespace ef::h5 {

/**
 * Why dataset `name` of `f` is not numbers ("holds strings, not numbers", "is not a dataset",
 * ...), or "" when its elements are integers or floats (internal). Readers of input data ask
 * before reading, so a string, compound or variable-length dataset given as data is refused
 * with one line naming the file and the dataset, never with the failing HDF5 call.
 */
std::string not_numbers(const File& f, const std::string& name);

}  // namespace ef::h5
