// SPDX-License-Identifier: MIT
#include "src/recon/ptycho_h5.hpp"

#include <algorithm>

#include <ensemblefit/core/error.hpp>

namespace ef::recon::h5x {

namespace {

using h5::H5Handle;

H5Handle open_dataset(const h5::File& f, const std::string& name) {
    const hid_t id = H5Dopen2(f.id(), name.c_str(), H5P_DEFAULT);
    if (id < 0) throw data_error(f.path() + ": no dataset '" + name + "'");
    return H5Handle(id, H5Dclose);
}

H5Handle link_create_props(const h5::File& f) {
    H5Handle lcpl(EF_H5_CHECK(H5Pcreate(H5P_LINK_CREATE), f.path()), H5Pclose);
    EF_H5_CHECK(H5Pset_create_intermediate_group(lcpl.get(), 1), f.path());
    return lcpl;
}

/// The complex compound {r, i} of `real` (H5T_NATIVE_FLOAT or H5T_NATIVE_DOUBLE).
H5Handle complex_type(const h5::File& f, hid_t real) {
    const size_t s = H5Tget_size(real);
    H5Handle t(EF_H5_CHECK(H5Tcreate(H5T_COMPOUND, 2 * s), f.path()), H5Tclose);
    EF_H5_CHECK(H5Tinsert(t.get(), "r", 0, real), f.path());
    EF_H5_CHECK(H5Tinsert(t.get(), "i", s, real), f.path());
    return t;
}

void rows_io(const h5::File& f, const std::string& name, std::uint64_t first, std::uint64_t count, hid_t memtype,
             void* read_to, const void* write_from) {
    H5Handle ds = open_dataset(f, name);
    H5Handle fspace(EF_H5_CHECK(H5Dget_space(ds.get()), f.path()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(fspace.get());
    if (rank < 1) throw data_error(f.path() + ": '" + name + "' is not an array");
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    H5Sget_simple_extent_dims(fspace.get(), dims.data(), nullptr);
    if (first + count > dims[0])
        throw data_error(f.path() + ": '" + name + "' has " + std::to_string(dims[0]) + " rows, wanted rows up to " +
                         std::to_string(first + count));
    if (count == 0) return;
    std::vector<hsize_t> start(dims.size(), 0), cnt = dims;
    start[0] = first;
    cnt[0] = count;
    EF_H5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, cnt.data(), nullptr),
                f.path());
    H5Handle mspace(EF_H5_CHECK(H5Screate_simple(rank, cnt.data(), nullptr), f.path()), H5Sclose);
    if (read_to)
        EF_H5_CHECK(H5Dread(ds.get(), memtype, mspace.get(), fspace.get(), H5P_DEFAULT, read_to), f.path());
    else
        EF_H5_CHECK(H5Dwrite(ds.get(), memtype, mspace.get(), fspace.get(), H5P_DEFAULT, write_from), f.path());
}

void create(h5::File& f, const std::string& name, hid_t type, const std::vector<std::uint64_t>& dims,
            std::uint64_t chunk_rows, int deflate) {
    remove(f, name);
    std::vector<hsize_t> d(dims.begin(), dims.end());
    H5Handle space(EF_H5_CHECK(H5Screate_simple(static_cast<int>(d.size()), d.data(), nullptr), f.path()), H5Sclose);
    H5Handle dcpl(EF_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), f.path()), H5Pclose);
    if (chunk_rows > 0 && !d.empty() && d[0] > 0) {
        std::vector<hsize_t> chunk = d;
        chunk[0] = std::min<hsize_t>(chunk_rows, d[0]);
        EF_H5_CHECK(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), f.path());
        if (deflate > 0) {
            EF_H5_CHECK(H5Pset_shuffle(dcpl.get()), f.path());
            EF_H5_CHECK(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(deflate)), f.path());
        }
    }
    H5Handle lcpl = link_create_props(f);
    H5Handle ds(EF_H5_CHECK(H5Dcreate2(f.id(), name.c_str(), type, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT),
                            f.path()),
                H5Dclose);
}

}  // namespace

void remove(h5::File& f, const std::string& name) {
    if (f.exists(name)) EF_H5_CHECK(H5Ldelete(f.id(), name.c_str(), H5P_DEFAULT), f.path());
}

bool is_compound(const h5::File& f, const std::string& name) {
    H5Handle ds = open_dataset(f, name);
    H5Handle t(EF_H5_CHECK(H5Dget_type(ds.get()), f.path()), H5Tclose);
    return H5Tget_class(t.get()) == H5T_COMPOUND;
}

void create_float(h5::File& f, const std::string& name, const std::vector<std::uint64_t>& dims,
                  std::uint64_t chunk_rows, int deflate) {
    create(f, name, H5T_IEEE_F32LE, dims, chunk_rows, deflate);
}

void write_float_rows(h5::File& f, const std::string& name, std::uint64_t first, std::uint64_t count,
                      const float* data) {
    rows_io(f, name, first, count, H5T_NATIVE_FLOAT, nullptr, data);
}

void read_float_rows(const h5::File& f, const std::string& name, std::uint64_t first, std::uint64_t count,
                     float* out) {
    if (is_compound(f, name)) throw data_error(f.path() + ": '" + name + "' is complex, expected real intensities");
    rows_io(f, name, first, count, H5T_NATIVE_FLOAT, out, nullptr);
}

void write_complex(h5::File& f, const std::string& name, const std::vector<std::uint64_t>& dims,
                   const std::vector<std::complex<double>>& data) {
    H5Handle file_type = complex_type(f, H5T_IEEE_F32LE);
    create(f, name, file_type.get(), dims, 0, 0);
    H5Handle mem_type = complex_type(f, H5T_NATIVE_DOUBLE);
    H5Handle ds = open_dataset(f, name);
    if (!data.empty())
        EF_H5_CHECK(H5Dwrite(ds.get(), mem_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), f.path());
}

std::vector<std::complex<double>> read_complex(const h5::File& f, const std::string& name,
                                               std::vector<std::uint64_t>& dims) {
    if (!is_compound(f, name)) throw data_error(f.path() + ": '" + name + "' is not complex (compound r, i)");
    dims = f.shape(name);
    std::uint64_t n = 1;
    for (auto d : dims) n *= d;
    std::vector<std::complex<double>> out(n);
    H5Handle mem_type = complex_type(f, H5T_NATIVE_DOUBLE);
    H5Handle ds = open_dataset(f, name);
    if (n > 0) {
        const herr_t rc = H5Dread(ds.get(), mem_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
        if (rc < 0) throw data_error(f.path() + ": '" + name + "': cannot read as complex (fields r and i)");
    }
    return out;
}

void write_double(h5::File& f, const std::string& name, const std::vector<std::uint64_t>& dims,
                  const std::vector<double>& data) {
    create(f, name, H5T_IEEE_F64LE, dims, 0, 0);
    H5Handle ds = open_dataset(f, name);
    if (!data.empty())
        EF_H5_CHECK(H5Dwrite(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), f.path());
}

}  // namespace ef::recon::h5x
