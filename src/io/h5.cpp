// SPDX-License-Identifier: MIT
#include "src/io/h5.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>

#include <ensemblefit/core/error.hpp>

namespace ef::h5 {

namespace {

/// Walks the error stack from the innermost entry; keeps the first system error text (the
/// file drivers write "errno = 28, error message = 'No space left on device'").
herr_t find_system_error(unsigned, const H5E_error2_t* e, void* data) {
    auto* found = static_cast<std::string*>(data);
    if (!found->empty() || !e || !e->desc) return 0;
    const std::string desc = e->desc;
    const std::string key = "error message = '";
    const auto k = desc.find(key);
    if (k != std::string::npos) *found = desc.substr(k + key.size(), desc.find('\'', k + key.size()) - k - key.size());
    return 0;
}

}  // namespace

std::string system_reason() {
    std::string found;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, find_system_error, &found);
    return found;
}

void fail(const char* call, const char* file, int line, const std::string& path) {
    const std::string reason = system_reason();
    if (!reason.empty()) {
        const std::string c = call;
        throw data_error(path + ": " + reason + " (" + c.substr(0, c.find('(')) + ")");
    }
    throw runtime_error(path + ": HDF5 call failed: " + call + " (" + file + ":" + std::to_string(line) + ")");
}

void quiet_errors() {
    static std::once_flag once;
    std::call_once(once, [] {
        // No library clean-up at exit: after a write that failed half-way (disk full) HDF5 1.10's
        // clean-up crashes closing the file again (H5F__close_cb). Every file is closed by its
        // H5Handle before the program ends, so the clean-up has nothing to do anyway.
        H5dont_atexit();
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    });
}

bool is_hdf5(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    char sig[8] = {};
    in.read(sig, 8);
    return in.gcount() == 8 && std::memcmp(sig, "\x89HDF\r\n\x1a\n", 8) == 0;
}

namespace {

H5Handle dataset(const File& f, const std::string& name) {
    const hid_t id = H5Dopen2(f.id(), name.c_str(), H5P_DEFAULT);
    if (id < 0) throw data_error(f.path() + ": no dataset '" + name + "'");
    return H5Handle(id, H5Dclose);
}

H5Handle object(const File& f, const std::string& name) {
    const hid_t id = H5Oopen(f.id(), name.c_str(), H5P_DEFAULT);
    if (id < 0) throw data_error(f.path() + ": no object '" + name + "'");
    return H5Handle(id, H5Oclose);
}

/// `chunk_rows` = 0: allocated at creation (extensible: in chunks of about 64 KiB), so later
/// row writes never change the file's metadata. > 0: extensible, in chunks of `chunk_rows`
/// rows allocated as they are first written (rows never written read as the fill value), or, with
/// `in_place`, all at once and never filled (RowStorage::in_place).
void create_dataset(File& f, const std::string& name, hid_t type, std::uint64_t rows, std::uint64_t cols,
                    const void* fill, bool extensible, std::uint64_t chunk_rows = 0, bool in_place = false) {
    hsize_t dims[2] = {rows, cols};
    hsize_t max_dims[2] = {H5S_UNLIMITED, cols};
    H5Handle space(EF_H5_CHECK(H5Screate_simple(cols ? 2 : 1, dims, extensible ? max_dims : nullptr), f.path()),
                   H5Sclose);
    H5Handle dcpl(EF_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), f.path()), H5Pclose);
    if (extensible) {
        const std::uint64_t row_bytes = 8 * (cols ? cols : 1);
        const std::uint64_t c =
            chunk_rows > 0 ? chunk_rows : std::min<std::uint64_t>(std::max<std::uint64_t>(rows, 1), 65536 / row_bytes);
        hsize_t chunk[2] = {std::max<hsize_t>(1, c), cols};
        EF_H5_CHECK(H5Pset_chunk(dcpl.get(), cols ? 2 : 1, chunk), f.path());
    }
    EF_H5_CHECK(H5Pset_fill_value(dcpl.get(), type, fill), f.path());
    if (chunk_rows == 0 || in_place) EF_H5_CHECK(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), f.path());
    else EF_H5_CHECK(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_INCR), f.path());
    if (in_place) EF_H5_CHECK(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), f.path());
    H5Handle lcpl(EF_H5_CHECK(H5Pcreate(H5P_LINK_CREATE), f.path()), H5Pclose);
    EF_H5_CHECK(H5Pset_create_intermediate_group(lcpl.get(), 1), f.path());
    H5Handle ds(EF_H5_CHECK(H5Dcreate2(f.id(), name.c_str(), type, space.get(), lcpl.get(),
                                       dcpl.get(), H5P_DEFAULT), f.path() + ": creating " + name), H5Dclose);
}

/// Rows [row, row + count) of the open dataset `ds` (`name` in `path`) from row-major data.
void write_hyperslab(hid_t ds, const std::string& path, const std::string& name, hid_t type, std::uint64_t row,
                     std::uint64_t count, const void* data) {
    if (count == 0) return;
    H5Handle fspace(EF_H5_CHECK(H5Dget_space(ds), path), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(fspace.get());
    hsize_t dims[2] = {0, 0};
    H5Sget_simple_extent_dims(fspace.get(), dims, nullptr);
    hsize_t start[2] = {row, 0};
    hsize_t cnt[2] = {count, rank == 2 ? dims[1] : 1};
    EF_H5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, cnt, nullptr), path);
    H5Handle mspace(EF_H5_CHECK(H5Screate_simple(rank, cnt, nullptr), path), H5Sclose);
    EF_H5_CHECK(H5Dwrite(ds, type, mspace.get(), fspace.get(), H5P_DEFAULT, data), path + ": writing " + name);
}

void write_block(File& f, const std::string& name, hid_t type, std::uint64_t row,
                 std::uint64_t count, const void* data) {
    if (count == 0) return;
    H5Handle ds = dataset(f, name);
    write_hyperslab(ds.get(), f.path(), name, type, row, count, data);
}

template <class T>
std::vector<T> read_all(const File& f, const std::string& name, hid_t type) {
    H5Handle ds = dataset(f, name);
    H5Handle space(EF_H5_CHECK(H5Dget_space(ds.get()), f.path()), H5Sclose);
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    std::vector<T> v(static_cast<size_t>(n));
    if (n > 0)
        EF_H5_CHECK(H5Dread(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), f.path());
    return v;
}

H5Handle open_or_create_attr(File& f, const std::string& obj, const std::string& name, hid_t type,
                             hid_t space) {
    H5Handle o = object(f, obj);
    if (H5Aexists(o.get(), name.c_str()) > 0) EF_H5_CHECK(H5Adelete(o.get(), name.c_str()), f.path());
    return H5Handle(EF_H5_CHECK(H5Acreate2(o.get(), name.c_str(), type, space, H5P_DEFAULT,
                                           H5P_DEFAULT), f.path() + ": writing attribute " + name), H5Aclose);
}

H5Handle open_attr(const File& f, const std::string& obj, const std::string& name) {
    H5Handle o = object(f, obj);
    const hid_t a = H5Aopen(o.get(), name.c_str(), H5P_DEFAULT);
    if (a < 0) throw data_error(f.path() + ": no attribute '" + name + "' on '" + obj + "'");
    return H5Handle(a, H5Aclose);
}

/// What an attribute read expects of its type: text (`variable`: variable-length strings, as
/// this program writes lists of names) or a number. Another type is a file this program did not
/// write: data_error naming it (exit 3), never a failed conversion reported as a bug.
enum class AttrKind { text, text_list, number, numbers };

H5Handle open_attr(const File& f, const std::string& obj, const std::string& name, AttrKind kind) {
    H5Handle a = open_attr(f, obj, name);
    H5Handle type(EF_H5_CHECK(H5Aget_type(a.get()), f.path()), H5Tclose);
    const H5T_class_t cls = H5Tget_class(type.get());
    H5Handle space(EF_H5_CHECK(H5Aget_space(a.get()), f.path()), H5Sclose);
    const bool one = H5Sget_simple_extent_npoints(space.get()) == 1;  // a scalar is read into one value
    const bool numeric = kind == AttrKind::number || kind == AttrKind::numbers;
    const bool ok = numeric ? (cls == H5T_INTEGER || cls == H5T_FLOAT) && (kind == AttrKind::numbers || one)
                            : cls == H5T_STRING && (kind == AttrKind::text ? one : H5Tis_variable_str(type.get()) > 0);
    if (!ok)
        throw data_error(f.path() + ": attribute '" + name + "' on '" + obj + "' is not " +
                         (kind == AttrKind::number    ? "one number"
                          : kind == AttrKind::numbers ? "a list of numbers"
                          : kind == AttrKind::text    ? "one text"
                                                      : "a list of variable-length strings"));
    return a;
}

}  // namespace

File File::create(const std::string& path) {
    quiet_errors();
    const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (id < 0) {
        const std::string reason = system_reason();
        throw data_error(path + ": cannot create the file" + (reason.empty() ? "" : " (" + reason + ")"));
    }
    return File(H5Handle(id, H5Fclose), path);
}

File File::open_read(const std::string& path) {
    quiet_errors();
    const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (id < 0) throw data_error(path + ": cannot open as an HDF5 file");
    return File(H5Handle(id, H5Fclose), path);
}

File File::open_write(const std::string& path) {
    quiet_errors();
    const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    if (id < 0) {
        const std::string reason = system_reason();
        throw data_error(path + ": cannot open as an HDF5 file for writing (" +
                         (reason.empty() ? "not HDF5, or damaged" : reason) + ")");
    }
    return File(H5Handle(id, H5Fclose), path);
}

bool File::exists(const std::string& name) const {
    // Check each path component: H5Lexists fails on a missing intermediate group.
    std::string partial;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = name.find('/', pos + 1);
        partial = name.substr(0, pos);
        if (partial.empty() || partial == "/") continue;
        if (H5Lexists(id(), partial.c_str(), H5P_DEFAULT) <= 0) return false;
    }
    return true;
}

void File::create_group(const std::string& name) {
    H5Handle lcpl(EF_H5_CHECK(H5Pcreate(H5P_LINK_CREATE), path_), H5Pclose);
    EF_H5_CHECK(H5Pset_create_intermediate_group(lcpl.get(), 1), path_);
    H5Handle g(EF_H5_CHECK(H5Gcreate2(id(), name.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), path_),
               H5Gclose);
}

std::vector<std::string> File::list(const std::string& group) const {
    std::vector<std::string> names;
    H5Handle g(H5Gopen2(id(), group.c_str(), H5P_DEFAULT), H5Gclose);
    if (!g) return names;
    H5G_info_t info;
    EF_H5_CHECK(H5Gget_info(g.get(), &info), path_);
    for (hsize_t i = 0; i < info.nlinks; ++i) {
        const ssize_t len = H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0,
                                               H5P_DEFAULT);
        std::string s(static_cast<size_t>(len), '\0');
        H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, s.data(), s.size() + 1,
                           H5P_DEFAULT);
        names.push_back(s);
    }
    return names;
}

void File::create_double(const std::string& name, std::uint64_t rows, std::uint64_t cols, double fill,
                         bool extensible) {
    create_dataset(*this, name, H5T_NATIVE_DOUBLE, rows, cols, &fill, extensible);
}
void File::create_int64(const std::string& name, std::uint64_t rows, std::uint64_t cols, std::int64_t fill,
                        bool extensible) {
    create_dataset(*this, name, H5T_NATIVE_INT64, rows, cols, &fill, extensible);
}
void File::create_rows_double(const std::string& name, std::uint64_t rows, std::uint64_t cols, double fill,
                              std::uint64_t chunk_rows, RowStorage storage) {
    create_dataset(*this, name, H5T_NATIVE_DOUBLE, rows, cols, &fill, true, std::max<std::uint64_t>(chunk_rows, 1),
                   storage == RowStorage::in_place);
}
void File::create_rows_int64(const std::string& name, std::uint64_t rows, std::uint64_t cols, std::int64_t fill,
                             std::uint64_t chunk_rows, RowStorage storage) {
    create_dataset(*this, name, H5T_NATIVE_INT64, rows, cols, &fill, true, std::max<std::uint64_t>(chunk_rows, 1),
                   storage == RowStorage::in_place);
}
std::vector<std::uint64_t> File::chunk_addresses(const std::string& name, std::uint64_t& chunk_rows) const {
    H5Handle ds = dataset(*this, name);
    H5Handle dcpl(EF_H5_CHECK(H5Dget_create_plist(ds.get()), path_), H5Pclose);
    H5Handle type(EF_H5_CHECK(H5Dget_type(ds.get()), path_), H5Tclose);
    H5Handle space(EF_H5_CHECK(H5Dget_space(ds.get()), path_), H5Sclose);
    const bool native = H5Tequal(type.get(), H5T_NATIVE_DOUBLE) > 0 || H5Tequal(type.get(), H5T_NATIVE_INT64) > 0;
    H5D_alloc_time_t alloc = H5D_ALLOC_TIME_DEFAULT;
    EF_H5_CHECK(H5Pget_alloc_time(dcpl.get(), &alloc), path_);
    // Early allocation: rows added by a later extension get their chunks at once too.
    if (!native || H5Pget_layout(dcpl.get()) != H5D_CHUNKED || H5Pget_nfilters(dcpl.get()) != 0 ||
        alloc != H5D_ALLOC_TIME_EARLY)
        return {};
    const int ndims = H5Sget_simple_extent_ndims(space.get());
    hsize_t dims[2] = {0, 1}, chunk[2] = {0, 1};
    if (ndims < 1 || ndims > 2 || H5Sget_simple_extent_dims(space.get(), dims, nullptr) < 0 ||
        H5Pget_chunk(dcpl.get(), ndims, chunk) != ndims || chunk[0] == 0 || (ndims == 2 && chunk[1] != dims[1]))
        return {};
    chunk_rows = chunk[0];
    const hsize_t chunk_bytes = chunk[0] * chunk[1] * H5Tget_size(type.get());
    std::vector<std::uint64_t> out;
    for (hsize_t row = 0; row < dims[0]; row += chunk[0]) {
        hsize_t at[2] = {row, 0};
        unsigned filters = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0;
        if (H5Dget_chunk_info_by_coord(ds.get(), at, &filters, &addr, &size) < 0 || addr == HADDR_UNDEF ||
            size != chunk_bytes)
            return {};  // a chunk not allocated (a file made for rows written by rank 0)
        out.push_back(addr);
    }
    return out;
}
Dataset File::open_dataset(const std::string& name, std::size_t cache_bytes) const {
    H5Handle dapl(EF_H5_CHECK(H5Pcreate(H5P_DATASET_ACCESS), path_), H5Pclose);
    // 12421 slots (a prime, as HDF5 asks): enough that chunks rarely share one.
    EF_H5_CHECK(H5Pset_chunk_cache(dapl.get(), 12421, cache_bytes, 1.0), path_);
    const hid_t id = H5Dopen2(h_.get(), name.c_str(), dapl.get());
    if (id < 0) throw data_error(path_ + ": no dataset '" + name + "'");
    return Dataset(H5Handle(id, H5Dclose), path_, name);
}
void Dataset::write_rows(std::uint64_t row, std::uint64_t count, const double* data) {
    write_hyperslab(h_.get(), path_, name_, H5T_NATIVE_DOUBLE, row, count, data);
}
void Dataset::write_rows(std::uint64_t row, std::uint64_t count, const std::int64_t* data) {
    write_hyperslab(h_.get(), path_, name_, H5T_NATIVE_INT64, row, count, data);
}
bool File::extensible(const std::string& name) const {
    H5Handle ds = dataset(*this, name);
    H5Handle space(EF_H5_CHECK(H5Dget_space(ds.get()), path_), H5Sclose);
    hsize_t dims[2] = {0, 0}, max_dims[2] = {0, 0};
    EF_H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims, max_dims), path_);
    return max_dims[0] == H5S_UNLIMITED;
}
void File::extend_rows(const std::string& name, std::uint64_t rows) {
    H5Handle ds = dataset(*this, name);
    H5Handle space(EF_H5_CHECK(H5Dget_space(ds.get()), path_), H5Sclose);
    hsize_t dims[2] = {0, 0};
    EF_H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims, nullptr), path_);
    dims[0] = rows;
    EF_H5_CHECK(H5Dset_extent(ds.get(), dims), path_);
}
void File::write_rows(const std::string& name, std::uint64_t row, std::uint64_t count, const double* data) {
    write_block(*this, name, H5T_NATIVE_DOUBLE, row, count, data);
}
void File::write_rows(const std::string& name, std::uint64_t row, std::uint64_t count,
                      const std::int64_t* data) {
    write_block(*this, name, H5T_NATIVE_INT64, row, count, data);
}
void File::write(const std::string& name, const std::vector<double>& v, std::uint64_t cols) {
    const std::uint64_t rows = cols ? v.size() / cols : v.size();
    create_double(name, rows, cols, 0.0);
    write_rows(name, 0, rows, v.data());
}
void File::write(const std::string& name, const std::vector<std::int64_t>& v, std::uint64_t cols) {
    const std::uint64_t rows = cols ? v.size() / cols : v.size();
    create_int64(name, rows, cols, 0);
    write_rows(name, 0, rows, v.data());
}

void File::copy_from(const File& src, const std::string& src_name, const std::string& dst_name) {
    H5Handle lcpl(EF_H5_CHECK(H5Pcreate(H5P_LINK_CREATE), path_), H5Pclose);
    EF_H5_CHECK(H5Pset_create_intermediate_group(lcpl.get(), 1), path_);
    EF_H5_CHECK(H5Ocopy(src.id(), src_name.c_str(), id(), dst_name.c_str(), H5P_DEFAULT, lcpl.get()), path_);
}

std::vector<std::uint64_t> File::shape(const std::string& name) const {
    H5Handle ds = dataset(*this, name);
    H5Handle space(EF_H5_CHECK(H5Dget_space(ds.get()), path_), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    std::vector<hsize_t> dims(static_cast<size_t>(rank > 0 ? rank : 0));
    if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    return {dims.begin(), dims.end()};
}
std::vector<double> File::read_double(const std::string& name) const {
    return read_all<double>(*this, name, H5T_NATIVE_DOUBLE);
}
std::vector<std::int64_t> File::read_int64(const std::string& name) const {
    return read_all<std::int64_t>(*this, name, H5T_NATIVE_INT64);
}

void File::set_attr(const std::string& obj, const std::string& name, const std::string& value) {
    H5Handle type(EF_H5_CHECK(H5Tcopy(H5T_C_S1), path_), H5Tclose);
    EF_H5_CHECK(H5Tset_size(type.get(), value.empty() ? 1 : value.size()), path_);
    EF_H5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8), path_);
    H5Handle space(EF_H5_CHECK(H5Screate(H5S_SCALAR), path_), H5Sclose);
    H5Handle a = open_or_create_attr(*this, obj, name, type.get(), space.get());
    const std::string padded = value.empty() ? std::string(1, '\0') : value;
    EF_H5_CHECK(H5Awrite(a.get(), type.get(), padded.data()), path_ + ": writing attribute " + name);
}
void File::set_attr(const std::string& obj, const std::string& name, double value) {
    H5Handle space(EF_H5_CHECK(H5Screate(H5S_SCALAR), path_), H5Sclose);
    H5Handle a = open_or_create_attr(*this, obj, name, H5T_NATIVE_DOUBLE, space.get());
    EF_H5_CHECK(H5Awrite(a.get(), H5T_NATIVE_DOUBLE, &value), path_ + ": writing attribute " + name);
}
void File::set_attr(const std::string& obj, const std::string& name, std::int64_t value) {
    H5Handle space(EF_H5_CHECK(H5Screate(H5S_SCALAR), path_), H5Sclose);
    H5Handle a = open_or_create_attr(*this, obj, name, H5T_NATIVE_INT64, space.get());
    EF_H5_CHECK(H5Awrite(a.get(), H5T_NATIVE_INT64, &value), path_ + ": writing attribute " + name);
}
void File::set_attr(const std::string& obj, const std::string& name, const std::vector<std::string>& v) {
    // Variable-length strings: readable by h5py as a list of str.
    H5Handle type(EF_H5_CHECK(H5Tcopy(H5T_C_S1), path_), H5Tclose);
    EF_H5_CHECK(H5Tset_size(type.get(), H5T_VARIABLE), path_);
    EF_H5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8), path_);
    hsize_t n = v.size();
    H5Handle space(EF_H5_CHECK(H5Screate_simple(1, &n, nullptr), path_), H5Sclose);
    H5Handle a = open_or_create_attr(*this, obj, name, type.get(), space.get());
    std::vector<const char*> ptrs;
    for (const auto& s : v) ptrs.push_back(s.c_str());
    EF_H5_CHECK(H5Awrite(a.get(), type.get(), ptrs.data()), path_ + ": writing attribute " + name);
}
void File::set_attr(const std::string& obj, const std::string& name, const std::vector<double>& v) {
    hsize_t n = v.size();
    H5Handle space(EF_H5_CHECK(H5Screate_simple(1, &n, nullptr), path_), H5Sclose);
    H5Handle a = open_or_create_attr(*this, obj, name, H5T_NATIVE_DOUBLE, space.get());
    EF_H5_CHECK(H5Awrite(a.get(), H5T_NATIVE_DOUBLE, v.data()), path_ + ": writing attribute " + name);
}
bool File::has_attr(const std::string& obj, const std::string& name) const {
    H5Handle o(H5Oopen(id(), obj.c_str(), H5P_DEFAULT), H5Oclose);
    return o && H5Aexists(o.get(), name.c_str()) > 0;
}
std::string File::attr_string(const std::string& obj, const std::string& name) const {
    H5Handle a = open_attr(*this, obj, name, AttrKind::text);
    H5Handle type(EF_H5_CHECK(H5Aget_type(a.get()), path_), H5Tclose);
    if (H5Tis_variable_str(type.get()) > 0) {
        char* s = nullptr;
        H5Handle mt(EF_H5_CHECK(H5Tcopy(H5T_C_S1), path_), H5Tclose);
        EF_H5_CHECK(H5Tset_size(mt.get(), H5T_VARIABLE), path_);
        EF_H5_CHECK(H5Tset_cset(mt.get(), H5Tget_cset(type.get())), path_);
        EF_H5_CHECK(H5Aread(a.get(), mt.get(), &s), path_);
        std::string out = s ? s : "";
        H5free_memory(s);
        return out;
    }
    const size_t size = H5Tget_size(type.get());
    std::string s(size, '\0');
    EF_H5_CHECK(H5Aread(a.get(), type.get(), s.data()), path_);
    const auto z = s.find('\0');
    if (z != std::string::npos) s.resize(z);
    return s;
}
double File::attr_double(const std::string& obj, const std::string& name) const {
    H5Handle a = open_attr(*this, obj, name, AttrKind::number);
    double v = 0;
    EF_H5_CHECK(H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v), path_);
    return v;
}
std::int64_t File::attr_int64(const std::string& obj, const std::string& name) const {
    H5Handle a = open_attr(*this, obj, name, AttrKind::number);
    std::int64_t v = 0;
    EF_H5_CHECK(H5Aread(a.get(), H5T_NATIVE_INT64, &v), path_);
    return v;
}
std::vector<std::string> File::attr_strings(const std::string& obj, const std::string& name) const {
    H5Handle a = open_attr(*this, obj, name, AttrKind::text_list);
    H5Handle space(EF_H5_CHECK(H5Aget_space(a.get()), path_), H5Sclose);
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    std::vector<char*> ptrs(static_cast<size_t>(n), nullptr);
    H5Handle type(EF_H5_CHECK(H5Aget_type(a.get()), path_), H5Tclose);
    H5Handle mt(EF_H5_CHECK(H5Tcopy(H5T_C_S1), path_), H5Tclose);
    EF_H5_CHECK(H5Tset_size(mt.get(), H5T_VARIABLE), path_);
    EF_H5_CHECK(H5Tset_cset(mt.get(), H5Tget_cset(type.get())), path_);
    EF_H5_CHECK(H5Aread(a.get(), mt.get(), ptrs.data()), path_);
    std::vector<std::string> out;
    for (char* p : ptrs) {
        out.emplace_back(p ? p : "");
        H5free_memory(p);
    }
    return out;
}
std::vector<double> File::attr_doubles(const std::string& obj, const std::string& name) const {
    H5Handle a = open_attr(*this, obj, name, AttrKind::numbers);
    H5Handle space(EF_H5_CHECK(H5Aget_space(a.get()), path_), H5Sclose);
    std::vector<double> v(static_cast<size_t>(H5Sget_simple_extent_npoints(space.get())));
    if (!v.empty()) EF_H5_CHECK(H5Aread(a.get(), H5T_NATIVE_DOUBLE, v.data()), path_);
    return v;
}

bool File::has_type(const std::string& name, H5T_class_t cls, std::size_t bytes) const {
    H5Handle ds = dataset(*this, name);
    H5Handle type(EF_H5_CHECK(H5Dget_type(ds.get()), path_), H5Tclose);
    return H5Tget_class(type.get()) == cls && H5Tget_size(type.get()) == bytes;
}

void File::flush() { EF_H5_CHECK(H5Fflush(id(), H5F_SCOPE_GLOBAL), path_ + ": writing to disk"); }

void File::reserve(std::uint64_t bytes, const std::string& what) {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    struct stat st {};
    int rc = fd < 0 || fstat(fd, &st) != 0 ? errno : 0;
    if (rc == 0) rc = posix_fallocate(fd, 0, st.st_size + static_cast<off_t>(bytes));
    if (fd >= 0) ::close(fd);
    if (rc != 0)
        throw data_error(path_ + ": no room to write " + what + " (" + std::to_string(bytes) + " bytes: " +
                         std::strerror(rc) + ")");
    reserved_ = true;
}

void File::close() {
    h_.reset();
    if (!reserved_) return;
    // Give back the reserved bytes HDF5 did not use: cut the file at its end of allocation.
    reserved_ = false;
    haddr_t eoa = 0;
    {
        H5Handle f(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
        if (!f || H5Fget_eoa(f.get(), &eoa) < 0) return;
    }
    struct stat st {};
    if (eoa > 0 && stat(path_.c_str(), &st) == 0 && static_cast<haddr_t>(st.st_size) > eoa &&
        truncate(path_.c_str(), static_cast<off_t>(eoa)) != 0)
        std::fprintf(stderr, "ensemblefit: warning: %s: %lld reserved bytes not given back (%s)\n", path_.c_str(),
                     static_cast<long long>(st.st_size - static_cast<off_t>(eoa)), std::strerror(errno));
}

}  // namespace ef::h5
