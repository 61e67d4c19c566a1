// SPDX-License-Identifier: MIT
// The one output guard of every file the program writes (src/io/output_file.hpp): an input is
// never an output (device and inode), an existing file needs replace, files are written beside
// their targets and renamed only when every one is complete, a write error (the file size
// limit standing in for a full disk) keeps the previous files and leaves no temporary file.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include <ensemblefit/core/error.hpp>

#include "src/io/output_file.hpp"
#include "temp_dir.hpp"

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// The error of `f` (its code in `code`), "" when it threw none.
template <class F>
std::string error_of(F&& f, ef::ExitCode* code = nullptr) {
    try {
        f();
    } catch (const ef::Error& e) {
        if (code) *code = e.code();
        return e.what();
    }
    return "";
}

int temporary_files(const ef_test::TempDir& dir) {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.path))
        if (e.path().filename().string().find(".creating") != std::string::npos) ++n;
    return n;
}

}  // namespace

TEST_CASE("check_output_file: inputs by inode, folders and existing files are refused", "[io][output]") {
    ef_test::TempDir dir;
    const std::string input = dir.file("in.ini"), hard = dir.file("hard.ini"), link = dir.file("link.ini");
    std::ofstream(input) << "config\n";
    std::filesystem::create_hard_link(input, hard);
    std::filesystem::create_symlink(input, link);
    ef::ExitCode code{};
    for (const std::string& out : {input, hard, link}) {
        CHECK(error_of([&] { ef::check_output_file(out, "-o", true, {input}); }, &code).find("is the input") !=
              std::string::npos);
        CHECK(code == ef::ExitCode::usage);
    }
    CHECK(error_of([&] { ef::check_output_file(dir.path.string(), "-o", true, {}); }).find("is a folder") !=
          std::string::npos);
    CHECK(error_of([&] { ef::check_output_file(input, "-o", false, {}); }) ==
          "-o: '" + input + "' exists; pass --overwrite to replace it");
    CHECK(error_of([&] { ef::check_output_file(dir.file("none/x.csv"), "-o", true, {}); }).find("cannot write") !=
          std::string::npos);
    const std::string fifo = dir.file("pipe");
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);  // as /dev/null would be: renaming over it replaces the node
    CHECK(error_of([&] { ef::check_output_file(fifo, "-o", true, {}); }).find("is not a regular file") !=
          std::string::npos);
    CHECK(error_of([&] { ef::write_output_file(fifo, "-o", "x"); }).find("is not a regular file") != std::string::npos);
    CHECK(std::filesystem::is_fifo(fifo));
    CHECK(!ef::check_output_file(dir.file("new.csv"), "-o", false, {input}));
    CHECK(ef::check_output_file(input, "-o", true, {dir.file("other")}));
    CHECK(slurp(input) == "config\n");
}

TEST_CASE("OutputFiles: renamed together when complete, nothing left when not committed", "[io][output]") {
    ef_test::TempDir dir;
    const std::string a = dir.file("a.dat"), b = dir.file("b.dat"), target = dir.file("t.dat"),
                      link = dir.file("l.dat");
    std::ofstream(a) << "old a";
    {
        ef::OutputFiles set("export");
        set.add(a, "new a");
        set.add(b, "new b");
        CHECK(slurp(a) == "old a");
        CHECK(!ef::file_exists(b));
    }  // not committed: the previous files stay, the temporary ones go
    CHECK(slurp(a) == "old a");
    CHECK(!ef::file_exists(b));
    CHECK(temporary_files(dir) == 0);
    ef::OutputFiles set("export");
    set.add(a, "new a");
    set.add(b, "new b");
    set.commit();
    CHECK(slurp(a) == "new a");
    CHECK(slurp(b) == "new b");
    std::ofstream(target) << "old";
    std::filesystem::create_symlink(target, link);
    ef::write_output_file(link, "--trace", "new");
    CHECK(std::filesystem::is_symlink(link));  // the file it points to is replaced, not the link
    CHECK(slurp(target) == "new");
    CHECK(temporary_files(dir) == 0);
}

TEST_CASE("OutputFiles: a write error (file size limit) is exit 3 and keeps the previous file", "[io][output]") {
    ef_test::TempDir dir;
    const std::string path = dir.file("big.csv");
    std::ofstream(path) << "previous\n";
    rlimit old{};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    rlimit small = old;
    small.rlim_cur = 4096;
    std::signal(SIGXFSZ, SIG_IGN);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    ef::ExitCode code{};
    const std::string message =
        error_of([&] { ef::write_output_file(path, "report: --csv", std::string(100000, 'x')); }, &code);
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK(code == ef::ExitCode::data);
    CHECK(message == "report: --csv: writing '" + path + "' failed (File too large); the previous file is unchanged");
    CHECK(slurp(path) == "previous\n");
    CHECK(temporary_files(dir) == 0);
}
