// SPDX-License-Identifier: MIT
#include "src/recon/provenance.hpp"

#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>

#include <ensemblefit/core/error.hpp>

namespace ef::recon {

namespace {

using h5::H5Handle;

// ---- SHA-256 (FIPS 180-4) ---------------------------------------------------------------------

constexpr std::array<std::uint32_t, 64> kK = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/// Streaming SHA-256: update() with any pieces, then hex().
class Sha256 {
   public:
    void update(const unsigned char* p, std::size_t n) {
        bytes_ += n;
        while (n > 0) {
            const std::size_t take = std::min(n, 64 - fill_);
            std::copy(p, p + take, block_.begin() + static_cast<std::ptrdiff_t>(fill_));
            fill_ += take;
            p += take;
            n -= take;
            if (fill_ == 64) {
                compress();
                fill_ = 0;
            }
        }
    }
    std::string hex() {
        const std::uint64_t bits = bytes_ * 8;
        const unsigned char one = 0x80, zero = 0;
        update(&one, 1);
        while (fill_ != 56) update(&zero, 1);
        unsigned char len[8];
        for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(bits >> (56 - 8 * i));
        update(len, 8);
        char out[65];
        for (int i = 0; i < 8; ++i) std::snprintf(out + 8 * i, 9, "%08x", h_[static_cast<size_t>(i)]);
        return std::string(out, 64);
    }

   private:
    void compress() {
        std::uint32_t w[64];
        for (int i = 0; i < 16; ++i)
            w[i] = std::uint32_t(block_[4 * i]) << 24 | std::uint32_t(block_[4 * i + 1]) << 16 |
                   std::uint32_t(block_[4 * i + 2]) << 8 | std::uint32_t(block_[4 * i + 3]);
        for (int i = 16; i < 64; ++i) {
            const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        std::array<std::uint32_t, 8> v = h_;
        for (int i = 0; i < 64; ++i) {
            const std::uint32_t s1 = rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25);
            const std::uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
            const std::uint32_t t1 = v[7] + s1 + ch + kK[static_cast<size_t>(i)] + w[i];
            const std::uint32_t s0 = rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22);
            const std::uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            v = {t1 + s0 + maj, v[0], v[1], v[2], v[3] + t1, v[4], v[5], v[6]};
        }
        for (size_t i = 0; i < 8; ++i) h_[i] += v[i];
    }

    std::array<std::uint32_t, 8> h_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::array<unsigned char, 64> block_{};
    std::size_t fill_ = 0;
    std::uint64_t bytes_ = 0;
};

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

std::string sha256_hex(const void* data, std::size_t n) {
    Sha256 s;
    s.update(static_cast<const unsigned char*>(data), n);
    return s.hex();
}

InputRecord record_input(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw data_error(path + ": cannot read (for its checksum)");
    using Key = std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t>;
    static std::map<Key, InputRecord> memo;
    const Key key{path, static_cast<std::int64_t>(st.st_size), static_cast<std::int64_t>(st.st_mtim.tv_sec),
                  static_cast<std::int64_t>(st.st_mtim.tv_nsec)};
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(path.c_str(), "rb"), std::fclose);
    if (!in) throw data_error(path + ": cannot read (for its checksum)");
    Sha256 s;
    std::vector<unsigned char> buf(1 << 20);
    InputRecord r;
    r.path = path;
    for (std::size_t got; (got = std::fread(buf.data(), 1, buf.size(), in.get())) > 0;) {
        s.update(buf.data(), got);
        r.bytes += static_cast<std::int64_t>(got);
    }
    if (std::ferror(in.get())) throw data_error(path + ": read error (for its checksum)");
    r.sha256 = s.hex();
    memo.emplace(key, r);
    return r;
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

}  // namespace ef::recon
