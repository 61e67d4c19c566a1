// SPDX-License-Identifier: MIT
#include "src/io/fit_quality_io.hpp"

#include <hdf5.h>

namespace ef {

std::uint64_t fit_quality_bytes(std::uint64_t rows, std::uint64_t entries) {
    return 16 * rows + 64 * entries + 4096;
}

void write_fit_quality(h5::File& f, const FitQuality& q) {
    if (f.exists("/quality")) H5Ldelete(f.id(), "/quality", H5P_DEFAULT);
    f.create_group("/quality");
    if (!q.empty()) {
        f.set_attr("/quality", "chi2", q.chi2);
        f.set_attr("/quality", "n", q.n);
    }
    if (!q.dataset_names.empty()) {
        f.write("/quality/dataset_chi2", q.dataset_chi2);
        f.write("/quality/dataset_n", q.dataset_n);
        f.set_attr("/quality/dataset_chi2", "names", q.dataset_names);
    }
    if (!q.source_names.empty()) {
        f.write("/quality/shift", q.shift);
        f.write("/quality/shift_error", q.shift_error);
        f.write("/quality/pull", q.pull);
        f.set_attr("/quality/shift", "names", q.source_names);
    }
    if (!q.replica_index.empty()) {
        f.write("/quality/replica_chi2", q.replica_chi2);
        f.write("/quality/replica_index", q.replica_index);
    }
    f.flush();
}

FitQuality read_fit_quality(const h5::File& f) {
    FitQuality q;
    if (!f.exists("/quality")) return q;
    if (f.has_attr("/quality", "n")) {
        q.chi2 = f.attr_double("/quality", "chi2");
        q.n = f.attr_int64("/quality", "n");
    }
    if (f.exists("/quality/dataset_chi2")) {
        q.dataset_chi2 = f.read_double("/quality/dataset_chi2");
        q.dataset_n = f.read_int64("/quality/dataset_n");
        q.dataset_names = f.attr_strings("/quality/dataset_chi2", "names");
    }
    if (f.exists("/quality/shift")) {
        q.shift = f.read_double("/quality/shift");
        q.shift_error = f.read_double("/quality/shift_error");
        q.pull = f.read_double("/quality/pull");
        q.source_names = f.attr_strings("/quality/shift", "names");
    }
    if (f.exists("/quality/replica_chi2")) {
        q.replica_chi2 = f.read_double("/quality/replica_chi2");
        q.replica_index = f.read_int64("/quality/replica_index");
    }
    return q;
}

}  // namespace ef
