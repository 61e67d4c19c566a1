// SPDX-License-Identifier: MIT
// Provenance in result files (checksums, attributes copied with their types) and the loss trend
// of `reconstruct`'s progress lines (change, ETA, the stall rule).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "src/io/h5.hpp"
#include "src/recon/loss_trend.hpp"
#include "src/recon/provenance.hpp"
#include "temp_dir.hpp"

using namespace ef::recon;
using ef::h5::H5Handle;

namespace {

H5T_class_t attr_class(const ef::h5::File& f, const std::string& obj, const std::string& name) {
    H5Handle o(H5Oopen(f.id(), obj.c_str(), H5P_DEFAULT), H5Oclose);
    H5Handle a(H5Aopen(o.get(), name.c_str(), H5P_DEFAULT), H5Aclose);
    H5Handle t(H5Aget_type(a.get()), H5Tclose);
    return H5Tget_class(t.get());
}

}  // namespace

TEST_CASE("sha256: the FIPS 180-4 test vectors", "[provenance]") {
    const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    const std::string million(1000000, 'a');

    CHECK(sha256_hex("", 0) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abc", 3) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(sha256_hex(two_blocks.data(), two_blocks.size()) ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(sha256_hex(million.data(), million.size()) ==
          "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256: the SHA-extension rounds give the portable rounds' digest", "[provenance]") {
    // Lengths around the padding's one- and two-block cases and a large buffer of varied bytes.
    std::vector<unsigned char> data(1 << 20);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
    for (size_t n : {size_t(0), size_t(1), size_t(55), size_t(56), size_t(63), size_t(64), size_t(65), size_t(119),
                     size_t(120), size_t(128), size_t(1000), data.size()})
        CHECK(sha256_hex(data.data(), n, true) == sha256_hex(data.data(), n, false));
}

TEST_CASE("record_input: size and checksum of a file read in pieces", "[provenance]") {
    ef_test::TempDir dir;
    std::string text;
    for (int i = 0; i < 300000; ++i) text += static_cast<char>('a' + i % 23);  // > one 1 MiB read
    { std::ofstream(dir.file("in.bin"), std::ios::binary) << text; }

    const InputRecord r = record_input(dir.file("in.bin"));

    CHECK(r.path == dir.file("in.bin"));
    CHECK(r.bytes == static_cast<std::int64_t>(text.size()));
    CHECK(r.sha256 == sha256_hex(text.data(), text.size()));
    CHECK_THROWS(record_input(dir.file("missing.bin")));
}

TEST_CASE("prefetch_input_record: record_input takes the background checksum", "[provenance]") {
    ef_test::TempDir dir;
    const std::string text(5000000, 'q');
    { std::ofstream(dir.file("big.bin"), std::ios::binary) << text; }
    prefetch_input_record(dir.file("big.bin"));
    prefetch_input_record(dir.file("big.bin"));      // once is enough: a second call adds nothing
    prefetch_input_record(dir.file("missing.bin"));  // nothing to read: record_input() says so
    const InputRecord r = record_input(dir.file("big.bin"));
    CHECK(r.bytes == static_cast<std::int64_t>(text.size()));
    CHECK(r.sha256 == sha256_hex(text.data(), text.size()));
    CHECK_THROWS(record_input(dir.file("missing.bin")));
}

TEST_CASE("copy_attributes: every attribute keeps its type, shape and value", "[provenance]") {
    ef_test::TempDir dir;
    {
        ef::h5::File src = ef::h5::File::create(dir.file("src.h5"));
        src.set_attr("/", "dose", 1e7);
        src.set_attr("/", "kv", 80.0);
        src.set_attr("/", "seed", std::int64_t{3});
        src.set_attr("/", "simulator", std::string("ensemblefit simulate ptycho"));
        src.set_attr("/", "mode_power", std::vector<double>{0.9, 0.1});
        src.set_attr("/", "notes", std::vector<std::string>{"first", "second"});
        set_attr_int64s(src, "/", "scan", {32, 16});
    }
    const ef::h5::File src = ef::h5::File::open_read(dir.file("src.h5"));
    ef::h5::File dst = ef::h5::File::create(dir.file("dst.h5"));
    dst.create_group("/data_metadata");

    const int copied = copy_attributes(src, "/", dst, "/data_metadata");

    CHECK(copied == 7);
    const std::string g = "/data_metadata";
    CHECK(attr_class(dst, g, "dose") == H5T_FLOAT);
    CHECK(dst.attr_double(g, "dose") == 1e7);
    CHECK(dst.attr_double(g, "kv") == 80.0);
    CHECK(attr_class(dst, g, "seed") == H5T_INTEGER);
    CHECK(dst.attr_int64(g, "seed") == 3);
    CHECK(attr_class(dst, g, "simulator") == H5T_STRING);
    CHECK(dst.attr_string(g, "simulator") == "ensemblefit simulate ptycho");
    CHECK(dst.attr_doubles(g, "mode_power") == std::vector<double>{0.9, 0.1});
    CHECK(dst.attr_strings(g, "notes") == std::vector<std::string>{"first", "second"});
    CHECK(attr_class(dst, g, "scan") == H5T_INTEGER);
    CHECK(dst.attr_doubles(g, "scan") == std::vector<double>{32, 16});
    // Copying again replaces rather than fails (a checkpoint rewrites the same file).
    CHECK(copy_attributes(src, "/", dst, g) == 7);
}

TEST_CASE("attribute_text: numbers as numbers, never their raw bytes", "[provenance]") {
    ef_test::TempDir dir;
    ef::h5::File f = ef::h5::File::create(dir.file("a.h5"));
    f.set_attr("/", "dose", 1e7);
    f.set_attr("/", "step_px", 3.5);
    f.set_attr("/", "name", std::string("x y"));
    set_attr_int64s(f, "/", "scan", {32, 16});

    CHECK(attribute_text(f, "/", "dose") == "10000000");
    CHECK(attribute_text(f, "/", "step_px") == "3.5");
    CHECK(attribute_text(f, "/", "name") == "x y");
    CHECK(attribute_text(f, "/", "scan") == "32, 16");
}

TEST_CASE("loss trend: change over 10 iterations and ETA", "[provenance]") {
    std::vector<double> loss;
    for (int i = 0; i < 10; ++i) loss.push_back(100.0 - i);
    CHECK(std::isnan(loss_change(loss)));  // needs 11 values
    loss.push_back(80.0);

    CHECK(loss_change(loss) == Approx((80.0 - 100.0) / 100.0));
    // The first iteration (planning) is left out; then the mean of the last 10 times.
    CHECK(std::isnan(eta_seconds({}, 5)));
    CHECK(eta_seconds({9.0, 1.0, 3.0}, 10) == Approx(20.0));
    std::vector<double> secs(30, 2.0);
    secs.back() = 12.0;
    CHECK(eta_seconds(secs, 4) == Approx(4 * (9 * 2.0 + 12.0) / 10));
}

TEST_CASE("loss trend: the stall rule and its single warning", "[provenance]") {
    std::vector<double> falling;
    for (int i = 0; i < 60; ++i) falling.push_back(std::exp(-0.05 * i));
    std::vector<double> flat(falling.begin(), falling.begin() + 10);
    for (int i = 0; i < kStallWindow; ++i) flat.push_back(flat[9] * (1 - 1e-5 * i));  // < 0.1% gain
    std::vector<double> rising(falling.begin(), falling.begin() + 10);
    for (int i = 0; i < kStallWindow; ++i) rising.push_back(rising[9] * (1.01 + 0.01 * i));

    CHECK_FALSE(loss_stall(falling).stalled);
    // One iteration less: the window still holds a new minimum (iteration 10).
    CHECK_FALSE(loss_stall(std::vector<double>(flat.begin(), flat.end() - 1)).stalled);
    const LossStall f = loss_stall(flat);
    CHECK(f.stalled);
    CHECK_FALSE(f.rising);
    CHECK(f.best_iteration == 10);
    const LossStall r = loss_stall(rising);
    CHECK(r.stalled);
    CHECK(r.rising);

    LossWatch watch;
    CHECK(watch.check(falling).empty());
    const std::string w = watch.check(rising);
    CHECK(w.find("risen") != std::string::npos);
    CHECK(watch.check(rising).empty());  // once per run
    CHECK(LossWatch().check(flat).find("stopped falling") != std::string::npos);
}

namespace {

/// The nearest-neighbour median by brute force: every pair.
double brute_nearest_median(const std::vector<double>& yx) {
    const size_t n = yx.size() / 2;
    std::vector<double> nearest(n, 1e300);
    for (size_t a = 0; a < n; ++a)
        for (size_t b = 0; b < n; ++b)
            if (a != b) nearest[a] = std::min(nearest[a], std::hypot(yx[2 * a] - yx[2 * b], yx[2 * a + 1] - yx[2 * b + 1]));
    std::sort(nearest.begin(), nearest.end());
    return nearest[n / 2];
}

}  // namespace

TEST_CASE("median_step_px: the median nearest-neighbour distance, for a raster and a spiral", "[provenance]") {
    // A 7 x 9 raster of step 3 (row jumps included): 3.
    std::vector<double> raster;
    for (int y = 0; y < 7; ++y)
        for (int x = 0; x < 9; ++x) raster.insert(raster.end(), {3.0 * y, 3.0 * x});
    // A Fermat spiral (golden angle, radius ~ sqrt(k)), as simulate ptycho's, scaled so its
    // nearest-neighbour distances are about 10: consecutive points are far apart (the old
    // definition gave about 76 for such a scan).
    std::vector<double> spiral;
    const double golden = M_PI * (3.0 - std::sqrt(5.0));
    for (int k = 0; k < 400; ++k) {
        const double r = 5.8 * std::sqrt(k + 0.5), t = golden * k;
        spiral.insert(spiral.end(), {r * std::sin(t), r * std::cos(t)});
    }
    std::vector<double> consecutive;
    for (size_t i = 2; i < spiral.size(); i += 2)
        consecutive.push_back(std::hypot(spiral[i] - spiral[i - 2], spiral[i + 1] - spiral[i - 1]));
    std::sort(consecutive.begin(), consecutive.end());

    const double r = median_nearest_step(raster), s = median_nearest_step(spiral);

    CHECK(r == Approx(3.0).margin(1e-12));
    CHECK(s == Approx(brute_nearest_median(spiral)).margin(1e-12));
    CHECK(s > 9.0);
    CHECK(s < 11.5);
    CHECK(consecutive[consecutive.size() / 2] > 5 * s);  // what the old definition measured
    CHECK(median_nearest_step({1.0, 2.0}) == 0.0);
    CHECK(median_nearest_step({0.0, 0.0, 3.0, 4.0}) == Approx(5.0));
}
