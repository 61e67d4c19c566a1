// SPDX-License-Identifier: MIT
#include "src/io/h5_numeric.hpp"

namespace ef::h5 {

std::string not_numbers(const File& f, const std::string& name) {
    quiet_errors();
    const H5Handle ds(H5Dopen2(f.id(), name.c_str(), H5P_DEFAULT), H5Dclose);
    if (!ds) return "is not a dataset";
    const H5Handle type(EF_H5_CHECK(H5Dget_type(ds.get()), f.path()), H5Tclose);
    switch (H5Tget_class(type.get())) {
        case H5T_INTEGER:
        case H5T_FLOAT: return "";
        case H5T_STRING: return "holds strings, not numbers";
        case H5T_COMPOUND: return "holds compound records, not numbers";
        case H5T_VLEN: return "holds variable-length sequences, not numbers";
        case H5T_ARRAY: return "holds arrays, not numbers";
        case H5T_ENUM: return "holds enumerated values, not numbers";
        default: return "holds values that are not numbers";
    }
}

}  // namespace ef::h5
