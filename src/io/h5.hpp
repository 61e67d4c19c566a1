// SPDX-License-Identifier: MIT
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

/**
 * Thin checked wrappers over the HDF5 C API (internal; public headers never include hdf5.h).
 *
 * Every call goes through EF_H5_CHECK, which throws ef::Error naming the call, the source file
 * and line and the HDF5 file; handles are owned by H5Handle, so no path leaks an hid_t or closes
 * one twice. Only what ensemblefit needs: 1-D and 2-D datasets of double and int64, fixed-size
 * datasets written in row blocks (results are appended as chunks finish), and attributes.
 */
namespace ef::h5 {

/// Throws for a failed HDF5 call: exit 3 naming `path` (the file and what was being written) and
/// the system's reason when the library reports one (disk full, permission, file size limit),
/// else exit 1 naming the call (a bug).
[[noreturn]] void fail(const char* call, const char* file, int line, const std::string& path);

/// The system error text behind the last failed HDF5 call ("No space left on device"), or "".
std::string system_reason();

#define EF_H5_CHECK(call, path)                                          \
    ([&]() {                                                             \
        auto ef_h5_r = (call);                                           \
        if (ef_h5_r < 0) ::ef::h5::fail(#call, __FILE__, __LINE__, path); \
        return ef_h5_r;                                                  \
    }())

/// Owns one hid_t and closes it with the right H5*close.
class H5Handle {
   public:
    using Closer = herr_t (*)(hid_t);
    H5Handle() = default;
    H5Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
    H5Handle(const H5Handle&) = delete;
    H5Handle& operator=(const H5Handle&) = delete;
    H5Handle(H5Handle&& o) noexcept : id_(std::exchange(o.id_, -1)), closer_(o.closer_) {}
    H5Handle& operator=(H5Handle&& o) noexcept {
        if (this != &o) {
            reset();
            id_ = std::exchange(o.id_, -1);
            closer_ = o.closer_;
        }
        return *this;
    }
    ~H5Handle() { reset(); }
    void reset() {
        if (id_ >= 0 && closer_) closer_(id_);
        id_ = -1;
    }
    hid_t get() const { return id_; }
    explicit operator bool() const { return id_ >= 0; }

   private:
    hid_t id_ = -1;
    Closer closer_ = nullptr;
};

/// Silences HDF5's own error printing once per process; ef reports errors itself.
void quiet_errors();

/// True if `path` is an HDF5 file (by its signature).
bool is_hdf5(const std::string& path);

class File;

/// How the /replicas datasets' storage is made: `incremental`, chunk by chunk as rows are
/// written through HDF5, unwritten rows reading the fill value; `in_place`, every chunk allocated
/// at creation (H5D_ALLOC_TIME_EARLY) and never filled (H5D_FILL_TIME_NEVER: the file stays
/// sparse, unwritten rows read 0), so that other processes can write rows at fixed file offsets
/// (File::chunk_addresses; docs/parallel-output.md).
enum class RowStorage { incremental, in_place };

/**
 * A dataset kept open for many row writes (the results writer): one open, and a chunk cache
 * of its own large enough that a chunk written in several pieces is read back from memory,
 * not from the disk, and is written out whole by the next flush.
 */
class Dataset {
   public:
    Dataset() = default;
    /// Writes rows [row, row + count) from row-major data.
    void write_rows(std::uint64_t row, std::uint64_t count, const double* data);
    void write_rows(std::uint64_t row, std::uint64_t count, const std::int64_t* data);
    explicit operator bool() const { return static_cast<bool>(h_); }

   private:
    friend class File;
    Dataset(H5Handle h, std::string path, std::string name)
        : h_(std::move(h)), path_(std::move(path)), name_(std::move(name)) {}
    H5Handle h_;
    std::string path_;
    std::string name_;
};

class File {
   public:
    /// Creates (truncating) `path` for writing.
    static File create(const std::string& path);
    static File open_read(const std::string& path);
    static File open_write(const std::string& path);

    const std::string& path() const { return path_; }
    hid_t id() const { return h_.get(); }

    bool exists(const std::string& name) const;
    void create_group(const std::string& name);
    /// Names of the objects directly under `group`.
    std::vector<std::string> list(const std::string& group) const;

    /// Creates a rows x cols dataset (cols = 0 for 1-D) filled with `fill`.
    /// `extensible`: rows can be added later (extend_rows); chunked, still allocated at once.
    void create_double(const std::string& name, std::uint64_t rows, std::uint64_t cols, double fill,
                       bool extensible = false);
    void create_int64(const std::string& name, std::uint64_t rows, std::uint64_t cols, std::int64_t fill,
                      bool extensible = false);
    /// Creates a rows x cols dataset (cols = 0 for 1-D) that can grow, in chunks of
    /// `chunk_rows` rows, its storage allocated chunk by chunk as rows are written (rows never
    /// written read as `fill`), so creating a large one writes nothing yet.
    void create_rows_double(const std::string& name, std::uint64_t rows, std::uint64_t cols, double fill,
                            std::uint64_t chunk_rows, RowStorage storage = RowStorage::incremental);
    void create_rows_int64(const std::string& name, std::uint64_t rows, std::uint64_t cols, std::int64_t fill,
                           std::uint64_t chunk_rows, RowStorage storage = RowStorage::incremental);
    /// The file offset of each chunk of a row-chunked dataset (chunk k holds rows
    /// [k c, (k + 1) c), c = `chunk_rows` on return, whole rows of native 8-byte values one after
    /// the other), or none when rows cannot be written there directly: a dataset not made with
    /// RowStorage::in_place (its chunks allocated as rows come), a chunk not allocated, a filter,
    /// another layout or a non-native type. Final once the file is flushed.
    std::vector<std::uint64_t> chunk_addresses(const std::string& name, std::uint64_t& chunk_rows) const;
    /// Opens a dataset for repeated row writes with a chunk cache of `cache_bytes`.
    Dataset open_dataset(const std::string& name, std::size_t cache_bytes) const;
    bool extensible(const std::string& name) const;
    /// Grows an extensible dataset to `rows` rows (new rows hold the fill value).
    void extend_rows(const std::string& name, std::uint64_t rows);
    /// Writes rows [row, row + count) of a dataset from row-major data.
    void write_rows(const std::string& name, std::uint64_t row, std::uint64_t count, const double* data);
    void write_rows(const std::string& name, std::uint64_t row, std::uint64_t count, const std::int64_t* data);
    /// Creates and writes a whole dataset.
    void write(const std::string& name, const std::vector<double>& v, std::uint64_t cols = 0);
    void write(const std::string& name, const std::vector<std::int64_t>& v, std::uint64_t cols = 0);

    /// Shape of a dataset (1 or 2 dimensions).
    std::vector<std::uint64_t> shape(const std::string& name) const;
    /// Whether a dataset's elements are of class `cls` (H5T_INTEGER, H5T_FLOAT) and `bytes` wide.
    bool has_type(const std::string& name, H5T_class_t cls, std::size_t bytes) const;
    std::vector<double> read_double(const std::string& name) const;
    std::vector<std::int64_t> read_int64(const std::string& name) const;

    void set_attr(const std::string& obj, const std::string& name, const std::string& value);
    void set_attr(const std::string& obj, const std::string& name, double value);
    void set_attr(const std::string& obj, const std::string& name, std::int64_t value);
    void set_attr(const std::string& obj, const std::string& name, const std::vector<std::string>& v);
    void set_attr(const std::string& obj, const std::string& name, const std::vector<double>& v);
    bool has_attr(const std::string& obj, const std::string& name) const;
    std::string attr_string(const std::string& obj, const std::string& name) const;
    double attr_double(const std::string& obj, const std::string& name) const;
    std::int64_t attr_int64(const std::string& obj, const std::string& name) const;
    std::vector<std::string> attr_strings(const std::string& obj, const std::string& name) const;
    std::vector<double> attr_doubles(const std::string& obj, const std::string& name) const;

    /// Copies object `src_name` of `src` (a dataset or a whole group) to `dst_name` here.
    void copy_from(const File& src, const std::string& src_name, const std::string& dst_name);

    /// Pushes everything written so far to disk (after every chunk: a kill loses only what is
    /// in flight).
    void flush();
    /// Makes room on disk for `bytes` more (posix_fallocate past the end), so that writes that
    /// add metadata (`what`: the summary, the timing) cannot find the disk full half-way and
    /// leave a file HDF5 cannot open. No room: exit 3 naming the file and `what`, the file
    /// unchanged. close() gives back what HDF5 did not use.
    void reserve(std::uint64_t bytes, const std::string& what);
    void close();

   private:
    File(H5Handle h, std::string path) : h_(std::move(h)), path_(std::move(path)) {}
    H5Handle h_;
    std::string path_;
    bool reserved_ = false;
};

}  // namespace ef::h5
