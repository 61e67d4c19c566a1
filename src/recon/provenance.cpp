// SPDX-License-Identifier: MIT
#include "src/recon/provenance.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <cstdio>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <tuple>

#include <ensemblefit/core/error.hpp>

#include "src/core/sha256.hpp"
#include "src/core/thread_name.hpp"

namespace ef::recon {

namespace {

using h5::H5Handle;

// ---- attributes -------------------------------------------------------------------------------

H5Handle open_object(const h5::File& f, const std::string& obj) {
    const hid_t id = H5Oopen(f.id(), obj.c_str(), H5P_DEFAULT);
    if (id < 0) throw data_error(f.path() + ": no object '" + obj + "'");
    return H5Handle(id, H5Oclose);
}

herr_t collect_name(hid_t, const char* name, const H5A_info_t*, void* names) {
    static_cast<std::vector<std::string>*>(names)->emplace_back(name);
    return 0;
}

std::vector<std::string> attribute_names(const h5::File& f, hid_t obj) {
    std::vector<std::string> names;
    hsize_t idx = 0;
    EF_H5_CHECK(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_name, &names), f.path());
    return names;
}

/// One attribute, read in its native memory type: the buffer, and variable-length parts freed
/// by the destructor.
struct AttributeBuffer {
    H5Handle file_type, mem_type, space;
    std::vector<unsigned char> bytes;
    bool has_vlen = false;
    AttributeBuffer(const h5::File& f, hid_t attr) {
        file_type = H5Handle(EF_H5_CHECK(H5Aget_type(attr), f.path()), H5Tclose);
        mem_type = H5Handle(EF_H5_CHECK(H5Tget_native_type(file_type.get(), H5T_DIR_DEFAULT), f.path()), H5Tclose);
        space = H5Handle(EF_H5_CHECK(H5Aget_space(attr), f.path()), H5Sclose);
        const hssize_t n = H5Sget_simple_extent_npoints(space.get());
        bytes.assign(static_cast<size_t>(std::max<hssize_t>(n, 0)) * H5Tget_size(mem_type.get()), 0);
        has_vlen = H5Tis_variable_str(mem_type.get()) > 0 || H5Tdetect_class(mem_type.get(), H5T_VLEN) > 0;
        if (!bytes.empty()) EF_H5_CHECK(H5Aread(attr, mem_type.get(), bytes.data()), f.path());
    }
    AttributeBuffer(const AttributeBuffer&) = delete;
    AttributeBuffer& operator=(const AttributeBuffer&) = delete;
    ~AttributeBuffer() {
        if (!has_vlen || bytes.empty()) return;
#if H5_VERSION_GE(1, 12, 0)
        H5Treclaim(mem_type.get(), space.get(), H5P_DEFAULT, bytes.data());
#else
        H5Dvlen_reclaim(mem_type.get(), space.get(), H5P_DEFAULT, bytes.data());
#endif
    }
};

std::string number_list(const h5::File& f, const std::string& obj, const std::string& name) {
    const std::vector<double> v = f.attr_doubles(obj, name);
    std::ostringstream os;
    os.precision(10);
    for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
    return os.str();
}

}  // namespace

std::string sha256_hex(const void* data, std::size_t n, bool accelerated) {
    Sha256 s(accelerated);
    s.update(static_cast<const unsigned char*>(data), n);
    return s.hex();
}

namespace {

using RecordKey = std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t>;

/// The file's identity as recorded: path, size, modification time.
RecordKey record_key(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw data_error(path + ": cannot read (for its checksum)");
    return {path, static_cast<std::int64_t>(st.st_size), static_cast<std::int64_t>(st.st_mtim.tv_sec),
            static_cast<std::int64_t>(st.st_mtim.tv_nsec)};
}

/// Reads the file and checksums it.
InputRecord checksum_file(const std::string& path) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(path.c_str(), "rb"), std::fclose);
    if (!in) throw data_error(path + ": cannot read (for its checksum)");
    Sha256 s;
    std::vector<unsigned char> buf(4 << 20);
    InputRecord r;
    r.path = path;
    for (std::size_t got; (got = std::fread(buf.data(), 1, buf.size(), in.get())) > 0;) {
        s.update(buf.data(), got);
        r.bytes += static_cast<std::int64_t>(got);
    }
    if (std::ferror(in.get())) throw data_error(path + ": read error (for its checksum)");
    r.sha256 = s.hex();
    return r;
}

/// The records made so far, and the ones being made in the background (prefetch_input_record).
struct RecordMemo {
    std::mutex m;
    std::map<RecordKey, InputRecord> done;
    std::map<RecordKey, std::future<InputRecord>> pending;
};
RecordMemo& memo() {
    static RecordMemo r;
    return r;
}

}  // namespace

InputRecord record_input(const std::string& path) {
    const RecordKey key = record_key(path);
    RecordMemo& mm = memo();
    std::future<InputRecord> started;
    {
        std::lock_guard<std::mutex> lock(mm.m);
        if (auto it = mm.done.find(key); it != mm.done.end()) return it->second;
        if (auto it = mm.pending.find(key); it != mm.pending.end()) {
            started = std::move(it->second);
            mm.pending.erase(it);
        }
    }
    InputRecord r;
    bool have = false;
    if (started.valid()) {
        try {  // the background read failed (or the file changed meanwhile): read it here, report here
            r = started.get();
            have = record_key(path) == key;
        } catch (const std::exception&) {
        }
    }
    if (!have) r = checksum_file(path);
    std::lock_guard<std::mutex> lock(mm.m);
    mm.done.emplace(key, r);
    return r;
}

void prefetch_input_record(const std::string& path) {
    RecordKey key;
    try {
        key = record_key(path);
    } catch (const Error&) {
        return;  // record_input() reports it
    }
    RecordMemo& mm = memo();
    std::lock_guard<std::mutex> lock(mm.m);
    if (mm.done.count(key) || mm.pending.count(key)) return;
    // At normal priority: a GPU rank's host mostly waits on the device, so the thread has a core
    // to itself; beside a CPU rank's threads it costs about what the checksum at the end cost.
    // (Measured: at nice 19 on a loaded machine it starved, and the wait at the end grew 7x.)
    mm.pending.emplace(key, std::async(std::launch::async, [path] {
                           name_this_thread("ef-checksum");
                           return checksum_file(path);
                       }));
}

void write_input_record(h5::File& f, const std::string& obj, const std::string& prefix, const InputRecord& r) {
    f.set_attr(obj, prefix + "_file", r.path);
    f.set_attr(obj, prefix + "_bytes", r.bytes);
    f.set_attr(obj, prefix + "_sha256", r.sha256);
}

int copy_attributes(const h5::File& src, const std::string& src_obj, h5::File& dst, const std::string& dst_obj) {
    H5Handle from = open_object(src, src_obj);
    H5Handle to = open_object(dst, dst_obj);
    int copied = 0;
    for (const std::string& name : attribute_names(src, from.get())) {
        H5Handle a(EF_H5_CHECK(H5Aopen(from.get(), name.c_str(), H5P_DEFAULT), src.path()), H5Aclose);
        H5Handle type(EF_H5_CHECK(H5Aget_type(a.get()), src.path()), H5Tclose);
        if (H5Tdetect_class(type.get(), H5T_REFERENCE) > 0) continue;  // would point into the source file
        const AttributeBuffer buf(src, a.get());
        if (H5Aexists(to.get(), name.c_str()) > 0) EF_H5_CHECK(H5Adelete(to.get(), name.c_str()), dst.path());
        H5Handle b(EF_H5_CHECK(H5Acreate2(to.get(), name.c_str(), buf.file_type.get(), buf.space.get(), H5P_DEFAULT,
                                          H5P_DEFAULT),
                               dst.path()),
                   H5Aclose);
        if (!buf.bytes.empty()) EF_H5_CHECK(H5Awrite(b.get(), buf.mem_type.get(), buf.bytes.data()), dst.path());
        ++copied;
    }
    return copied;
}

std::string attribute_text(const h5::File& f, const std::string& obj, const std::string& name) {
    H5Handle o = open_object(f, obj);
    H5Handle a(EF_H5_CHECK(H5Aopen(o.get(), name.c_str(), H5P_DEFAULT), f.path()), H5Aclose);
    H5Handle type(EF_H5_CHECK(H5Aget_type(a.get()), f.path()), H5Tclose);
    const H5T_class_t c = H5Tget_class(type.get());
    if (c == H5T_STRING) {
        H5Handle space(EF_H5_CHECK(H5Aget_space(a.get()), f.path()), H5Sclose);
        if (H5Sget_simple_extent_type(space.get()) == H5S_SCALAR) return f.attr_string(obj, name);
        std::string out;
        for (const std::string& s : f.attr_strings(obj, name)) out += (out.empty() ? "" : ", ") + s;
        return out;
    }
    if (c == H5T_INTEGER || c == H5T_FLOAT) return number_list(f, obj, name);
    return "(" + std::to_string(static_cast<int>(c)) + "-class attribute)";
}

void set_attr_int64s(h5::File& f, const std::string& obj, const std::string& name, const std::vector<std::int64_t>& v) {
    H5Handle o = open_object(f, obj);
    if (H5Aexists(o.get(), name.c_str()) > 0) EF_H5_CHECK(H5Adelete(o.get(), name.c_str()), f.path());
    hsize_t n = v.size();
    H5Handle space(EF_H5_CHECK(H5Screate_simple(1, &n, nullptr), f.path()), H5Sclose);
    H5Handle a(EF_H5_CHECK(H5Acreate2(o.get(), name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                           f.path()),
               H5Aclose);
    if (!v.empty()) EF_H5_CHECK(H5Awrite(a.get(), H5T_NATIVE_INT64, v.data()), f.path());
}

double median_nearest_step(const std::vector<double>& yx) {
    const size_t n = yx.size() / 2;
    if (n < 2) return 0.0;
    std::vector<size_t> by_x(n);
    std::iota(by_x.begin(), by_x.end(), size_t{0});
    std::sort(by_x.begin(), by_x.end(), [&](size_t a, size_t b) { return yx[2 * a + 1] < yx[2 * b + 1]; });
    std::vector<double> nearest(n, std::numeric_limits<double>::infinity());
    for (size_t i = 0; i < n; ++i) {
        const size_t a = by_x[i];
        double& best = nearest[i];
        auto visit = [&](size_t j) {  // false once the x distance alone is no better
            const size_t b = by_x[j];
            const double dx = yx[2 * b + 1] - yx[2 * a + 1];
            if (std::abs(dx) >= best) return false;
            best = std::min(best, std::hypot(yx[2 * b] - yx[2 * a], dx));
            return true;
        };
        for (size_t j = i + 1; j < n && visit(j); ++j) {
        }
        for (size_t j = i; j-- > 0 && visit(j);) {
        }
    }
    const auto mid = nearest.begin() + static_cast<std::ptrdiff_t>(n / 2);
    std::nth_element(nearest.begin(), mid, nearest.end());
    return *mid;
}

}  // namespace ef::recon
