// SPDX-License-Identifier: MIT
#include <ensemblefit/core/replica_block.hpp>

#include <cstring>

#include <ensemblefit/core/error.hpp>

namespace ef {
namespace {

template <class T>
void put(std::vector<char>& b, const std::vector<T>& v) {
    const std::uint64_t n = v.size();
    const size_t at = b.size();
    b.resize(at + sizeof n + n * sizeof(T));
    std::memcpy(b.data() + at, &n, sizeof n);
    if (n) std::memcpy(b.data() + at + sizeof n, v.data(), n * sizeof(T));
}

template <class T>
void get(const char*& p, const char* end, std::vector<T>& v) {
    std::uint64_t n = 0;
    if (p + sizeof n > end) throw runtime_error("corrupt result message");
    std::memcpy(&n, p, sizeof n);
    p += sizeof n;
    if (p + n * sizeof(T) > end) throw runtime_error("corrupt result message");
    v.resize(n);
    if (n) std::memcpy(v.data(), p, n * sizeof(T));
    p += n * sizeof(T);
}

}  // namespace

std::vector<char> ReplicaBlock::pack() const {
    std::vector<char> b;
    put(b, std::vector<std::int64_t>{P});
    put(b, index);
    put(b, params);
    put(b, chi2);
    put(b, status);
    put(b, iterations);
    put(b, covariance);
    return b;
}

ReplicaBlock ReplicaBlock::unpack(const char* bytes, std::size_t size) {
    ReplicaBlock r;
    const char* p = bytes;
    const char* end = bytes + size;
    std::vector<std::int64_t> head;
    get(p, end, head);
    r.P = head.empty() ? 0 : static_cast<int>(head[0]);
    get(p, end, r.index);
    get(p, end, r.params);
    get(p, end, r.chi2);
    get(p, end, r.status);
    get(p, end, r.iterations);
    get(p, end, r.covariance);
    return r;
}

}  // namespace ef
