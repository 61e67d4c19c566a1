// SPDX-License-Identifier: MIT
// The NNPDF commondata reader on the shipped real data (inputs/dis-real): points kept by the
// cuts against the counts of an independent script (dis-real README, scripts/dis_summary.py),
// the systematics laid out as the files' treatments and types say, the deuteron as target 3.
// Malformed files, written by an independent writer: tests/mpi/commondata.sh.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/core/error.hpp>

#include "src/io/commondata.hpp"
#include "src/io/correlated_data.hpp"
#include "temp_dir.hpp"

namespace {

const std::string kSets = "BCDMS_NC_NOTFIXED_P, BCDMS_NC_NOTFIXED_D, SLAC_NC_NOTFIXED_P, SLAC_NC_NOTFIXED_D, "
                          "NMC_NC_NOTFIXED_P, NMC_NC_NOTFIXED_D";

ef::FitConfig config(const ef_test::TempDir& dir, const std::string& sets, const std::string& cuts = "") {
    const std::string path = dir.file("real.ini");
    std::ofstream(path) << "[data]\ncommondata = " EF_SOURCE_DIR "/inputs/dis-real\nsets = " << sets << "\n"
                        << cuts << "[model]\nname = linear\n[param.a]\nstart = 0\n[param.b]\nstart = 1\n"
                        << "[output]\nfile = out.h5\n";
    return ef::load_fit_config(path, {});
}

std::vector<int> rows_per_set(const ef::CorrelatedInputs& in) {
    std::vector<int> n(in.dataset_names.size(), 0);
    for (double d : in.dataset) ++n[static_cast<size_t>(d)];
    return n;
}

int column(const ef::FitConfig& cfg, const std::string& name) {
    const auto it = std::find(cfg.systematics.begin(), cfg.systematics.end(), name);
    REQUIRE(it != cfg.systematics.end());
    return static_cast<int>(it - cfg.systematics.begin());
}

}  // namespace

TEST_CASE("commondata: the usual cuts keep the points an independent script counts", "[commondata]") {
    ef_test::TempDir dir;
    ef::FitConfig cfg = config(dir, kSets);
    ef::DataTable data;
    ef::CorrelatedInputs in;

    ef::load_fit_data(cfg, data, in);

    // dis-real/README.md, "NNPDF cuts" column (Q2 > 3.49, W2 = Q2 (1-x)/x > 12.5)
    CHECK(rows_per_set(in) == std::vector<int>{333, 248, 33, 34, 113, 113});
    CHECK(data.n == 874);
    CHECK(in.dataset_names.front() == "BCDMS_NC_NOTFIXED_P");
    for (int i = 0; i < data.n; ++i) {
        const double x = data.x[3 * static_cast<size_t>(i)], q2 = data.x[3 * static_cast<size_t>(i) + 1];
        CHECK(q2 > 3.49);
        CHECK(q2 * (1 - x) / x > 12.5);
        const bool deuteron = in.dataset_names[static_cast<size_t>(in.dataset[static_cast<size_t>(i)])].back() == 'D';
        CHECK(data.x[3 * static_cast<size_t>(i) + 2] == (deuteron ? 3.0 : 1.0));
    }
}

TEST_CASE("commondata: without cuts every point is read", "[commondata]") {
    ef_test::TempDir dir;
    ef::FitConfig cfg = config(dir, kSets, "q2_min = 0\nw2_min = 0\n");
    ef::DataTable data;
    ef::CorrelatedInputs in;

    ef::load_fit_data(cfg, data, in);

    CHECK(rows_per_set(in) == std::vector<int>{351, 254, 211, 211, 158, 158});
}

TEST_CASE("commondata: systematics laid out by treatment and type", "[commondata]") {
    ef_test::TempDir dir;
    ef::FitConfig cfg = config(dir, "BCDMS_NC_NOTFIXED_P, BCDMS_NC_NOTFIXED_D", "q2_min = 0\nw2_min = 0\n");
    ef::DataTable data;
    ef::CorrelatedInputs in;

    ef::load_fit_data(cfg, data, in);

    // 5 shared types once, CORR sources per set: p sys_corr_6..11, d sys_corr_6..8
    REQUIRE(in.S == 5 + 6 + 3);
    CHECK(cfg.systematics.size() == 14);
    for (const char* add : {"BCDMSFB", "BCDMSFS", "BCDMSFR"}) CHECK(cfg.systematic_mult[static_cast<size_t>(column(cfg, add))] == 0);
    const int norm = column(cfg, "BCDMSNORM");
    CHECK(cfg.systematic_mult[static_cast<size_t>(norm)] == 1);
    CHECK(cfg.systematic_mult[static_cast<size_t>(column(cfg, "BCDMS_NC_NOTFIXED_D/sys_corr_8"))] == 1);
    const int p6 = column(cfg, "BCDMS_NC_NOTFIXED_P/sys_corr_6");
    for (int i = 0; i < data.n; ++i) {
        const size_t row = static_cast<size_t>(i) * static_cast<size_t>(in.S);
        // BCDMSNORM is 3 % of the central value in both files (dis-real README): relative 0.03
        CHECK(in.syst[row + static_cast<size_t>(norm)] == Approx(0.03).epsilon(1e-9));
        // a proton set's own CORR source is zero on deuteron rows
        if (in.dataset[static_cast<size_t>(i)] == 1.0) CHECK(in.syst[row + static_cast<size_t>(p6)] == 0.0);
    }
    // BCDMS: the statistical uncertainty is the only UNCORR source; first points of the files
    CHECK(data.sigma[0] == 0.006);
    CHECK(data.y[0] == 0.38934);
    CHECK(in.syst[static_cast<size_t>(column(cfg, "BCDMSFB"))] == -0.00116802);  // ADD: absolute
}

TEST_CASE("commondata: the data checksum covers cuts and treatments", "[commondata]") {
    ef_test::TempDir dir;
    ef::FitConfig a = config(dir, "SLAC_NC_NOTFIXED_P");
    ef::FitConfig b = config(dir, "SLAC_NC_NOTFIXED_P", "q2_min = 4\n");
    ef::DataTable da, db;
    ef::CorrelatedInputs ia, ib;

    ef::load_fit_data(a, da, ia);
    ef::load_fit_data(b, db, ib);

    CHECK(da.n > db.n);
    CHECK(da.checksum != db.checksum);
    CHECK(a.systematics == std::vector<std::string>{"SLACNORM", "SLACRELNORM"});
}

TEST_CASE("commondata: config errors name the key", "[commondata]") {
    ef_test::TempDir dir;
    const std::string path = dir.file("bad.ini");
    auto message = [&](const std::string& data_keys, ef::ExitCode code) {
        std::ofstream(path) << "[data]\n" << data_keys << "[model]\nname = linear\n[param.a]\nstart = 0\n"
                            << "[param.b]\nstart = 1\n[output]\nfile = out.h5\n";
        try {
            ef::FitConfig cfg = ef::load_fit_config(path, {});
            ef::DataTable d;
            ef::CorrelatedInputs in;
            ef::load_fit_data(cfg, d, in);
        } catch (const ef::Error& e) {
            CHECK(e.code() == code);
            return std::string(e.what());
        }
        return std::string();
    };
    const std::string real = "commondata = " EF_SOURCE_DIR "/inputs/dis-real\n";

    CHECK_THAT(message(real + "sets = SLAC_NC_NOTFIXED_P\nfile = x.csv\n", ef::ExitCode::usage),
               Catch::Contains("bad.ini:4: data.file: not used with data.commondata"));
    CHECK_THAT(message(real + "sets = NOPE_P\n", ef::ExitCode::usage),
               Catch::Contains("NOPE_P/: no such commondata set folder"));
    CHECK_THAT(message(real + "sets = SLAC_NC_NOTFIXED_P\nq2_min = 40\n", ef::ExitCode::data),
               Catch::Contains("set SLAC_NC_NOTFIXED_P: the cuts (Q2 > 40"));
    CHECK_THAT(message("file = x.csv\nx = x\ny = y\nsigma = 1\nq2_min = 3\n", ef::ExitCode::usage),
               Catch::Contains("bad.ini:6: data.q2_min: only with data.commondata"));
    CHECK_THAT(message(real + "sets = SLAC_NC_NOTFIXED_P\nx_min = 0.5\nx_max = 0.2\n", ef::ExitCode::usage),
               Catch::Contains("x_max must be above x_min"));
}
