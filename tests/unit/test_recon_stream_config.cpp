// SPDX-License-Identifier: MIT
// The [run] stream key (GPU patterns streamed per batch from host memory): its default, its
// values, the error that names the file, line and key, and its place in the resolved config.
#include <cstdio>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include <ensemblefit/core/error.hpp>
#include <ensemblefit/recon/recon_config.hpp>

namespace {
std::string write_stream_ini(const std::string& name, const std::string& run) {
    const std::string path = "/tmp/ef_recon_stream_test_" + name;
    std::ofstream(path) << "[data]\nfile = d.h5\n[run]\n" << run << "[output]\nfile = out.h5\n";
    return path;
}
}  // namespace

TEST_CASE("run.stream: auto by default, on and off from the file or the command line", "[recon][config]") {
    const std::string path = write_stream_ini("ok.ini", "stream = on\n");
    const std::string plain = write_stream_ini("plain.ini", "");

    const ef::ReconConfig dflt = ef::load_recon_config(plain, {});
    const ef::ReconConfig on = ef::load_recon_config(path, {});
    const ef::ReconConfig off = ef::load_recon_config(path, {"--run.stream=off"});
    const ef::ReconConfig back = ef::load_recon_config(path, {"--run.stream=off", "--run.stream=auto"});

    CHECK(dflt.stream == ef::TuningSwitch::automatic);
    CHECK(on.stream == ef::TuningSwitch::on);
    CHECK(on.where("run.stream") == path + ":4: run.stream");
    CHECK(off.stream == ef::TuningSwitch::off);
    CHECK(back.stream == ef::TuningSwitch::automatic);  // the last override wins
    CHECK(dflt.resolved_text().find("\nstream = auto\n") != std::string::npos);
    CHECK(on.resolved_text().find("\nstream = on\n") != std::string::npos);
    std::remove(path.c_str());
    std::remove(plain.c_str());
}

TEST_CASE("run.stream: a bad value is one usage error naming the file, line and allowed values", "[recon][config]") {
    const std::string path = write_stream_ini("bad.ini", "workers = gpu\nstream = yes\n");

    try {
        ef::load_recon_config(path, {});
        FAIL("no error");
    } catch (const ef::Error& e) {
        CHECK(e.code() == ef::ExitCode::usage);
        CHECK(std::string(e.what()) == path + ":5: run.stream: unknown value 'yes' (allowed: auto, on, off)");
    }
    try {
        ef::load_recon_config(path, {"--run.stream=sometimes"});
        FAIL("no error");
    } catch (const ef::Error& e) {
        CHECK(e.code() == ef::ExitCode::usage);
        CHECK(std::string(e.what()).find("run.stream: unknown value 'sometimes' (allowed: auto, on, off)") !=
              std::string::npos);
    }
    std::remove(path.c_str());
}
