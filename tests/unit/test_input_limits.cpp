// SPDX-License-Identifier: MIT
// The config and data parsers under hostile input: integers read wide and range-checked (never
// wrapped), the one INI parser's comment rule, odd lines, sizes refused against the machine's
// memory before anything is allocated, and echoed values cut short.
#include <catch2/catch.hpp>

#include <fstream>
#include <limits>
#include <string>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/io/data_table.hpp>

#include "src/config/capacity.hpp"
#include "src/config/ini_scan.hpp"
#include "src/core/text.hpp"
#include "temp_dir.hpp"

namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

/// The message of the ef::Error `fn` throws, with its exit code checked; "" when none is thrown.
template <class Fn>
std::string error_of(Fn fn, ef::ExitCode code) {
    try {
        fn();
    } catch (const ef::Error& e) {
        CHECK(e.code() == code);
        return e.what();
    }
    return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const char* kData = "x,y,s\n1,2.1,0.1\n2,3.9,0.1\n3,6.2,0.1\n";

std::string config(const std::string& data, const std::string& extra = "") {
    return "[data]\nfile = " + data + "\nx = x\ny = y\nsigma = s\n[model]\nname = formula\nformula = a + b*x\n"
           "[param.a]\nstart = 0\n[param.b]\nstart = 1\n[output]\nfile = out.h5\n" + extra;
}

}  // namespace

TEST_CASE("to_integer reads wide and refuses values outside the range instead of wrapping", "[limits]") {
    using ef::ini::to_integer;

    CHECK(to_integer("42", "k", 0, 100) == 42);
    CHECK(to_integer(" 1e6 ", "k", 0, 10000000) == 1000000);
    CHECK(to_integer("2.5e3", "k", 0, 10000) == 2500);
    CHECK(to_integer("-7", "k", -10, 10) == -7);

    const std::string wrap = error_of([] { to_integer("4294967297", "f.ini:3: fit.chunk", 0, 2147483647); },
                                      ef::ExitCode::usage);
    CHECK(wrap == "f.ini:3: fit.chunk: must be in 0..2147483647, got 4294967297");
    CHECK(contains(error_of([] { to_integer("99999999999999999999999", "k", 0, 5); }, ef::ExitCode::usage),
                   "k: must be in 0..5, got 99999999999999999999999"));
    CHECK(contains(error_of([] { to_integer("1e300", "k", 0, 5); }, ef::ExitCode::usage), "must be in 0..5"));
    CHECK(contains(error_of([] { to_integer("2.5", "k", 0, 5); }, ef::ExitCode::usage), "expected an integer, got '2.5'"));
    CHECK(contains(error_of([] { to_integer("0x10", "k", 0, 100); }, ef::ExitCode::usage), "expected an integer"));
    CHECK(contains(error_of([] { to_integer("inf", "k", 0, 100); }, ef::ExitCode::usage), "expected an integer"));
    CHECK(contains(error_of([] { to_integer("", "k", 0, 100); }, ef::ExitCode::usage), "expected an integer"));
}

TEST_CASE("to_real refuses NaN, values beyond double and words, and cuts what it echoes", "[limits]") {
    using ef::ini::to_real;

    CHECK(to_real("inf", "k") == std::numeric_limits<double>::infinity());
    CHECK(to_real("-2.5e-3", "k") == -2.5e-3);

    CHECK(contains(error_of([] { to_real("nan", "k"); }, ef::ExitCode::usage), "expected a number"));
    CHECK(contains(error_of([] { to_real("1e999", "k"); }, ef::ExitCode::usage), "expected a number"));
    CHECK(contains(error_of([] { to_real("infinity", "k"); }, ef::ExitCode::usage), "expected a number"));
    const std::string huge = error_of([] { to_real(std::string(100000, 'z'), "k"); }, ef::ExitCode::usage);
    CHECK(huge.size() < 120);
    CHECK(contains(huge, "zzz..."));
}

TEST_CASE("excerpt cuts long text and keeps the message on one line", "[limits]") {
    CHECK(ef::excerpt("short") == "short");
    CHECK(ef::excerpt(std::string(200, 'a')) == std::string(80, 'a') + "...");
    CHECK(ef::excerpt("a\nb\tc") == "a?b?c");
}

TEST_CASE("the INI scan: a comment starts at a line start or after a blank, other '#' stay in the value",
          "[limits]") {
    ef_test::TempDir dir;
    const std::string path = dir.file("c.ini");
    write(path, "\xEF\xBB\xBF[model]\n;=\n# note\nformula = a*x#b\nname = formula # a comment\n"
                "order = 2\t# tab before the comment\n");
    ef::ini::Rules rules;
    rules.section = [](const std::string&, const std::string&) {};
    rules.key = [](const std::string&, const std::string&, const std::string&) {};

    const auto keys = ef::ini::scan(path, rules);

    REQUIRE(keys.size() == 3);
    CHECK(keys[0].key == "model.formula");
    CHECK(keys[0].value == "a*x#b");
    CHECK(keys[0].line == 4);
    CHECK(keys[1].value == "formula");
    CHECK(keys[2].value == "2");
}

TEST_CASE("the INI scan refuses odd lines with FILE:LINE, never reading an endless line whole", "[limits]") {
    ef_test::TempDir dir;
    ef::ini::Rules rules;
    rules.section = [](const std::string&, const std::string&) {};
    rules.key = [](const std::string&, const std::string&, const std::string&) {};
    const auto message = [&](const std::string& text) {
        write(dir.file("o.ini"), text);
        return error_of([&] { ef::ini::scan(dir.file("o.ini"), rules); }, ef::ExitCode::usage);
    };

    CHECK(contains(message("[fit]\n= 3\n"), "o.ini:2: expected 'key = value', got no key before '='"));
    CHECK(contains(message("[fit\n"), "o.ini:1: malformed section header '[fit'"));
    CHECK(contains(message("[fit]\nx = 1\nx = 2\n"), "o.ini:3: key 'fit.x' is set twice"));
    CHECK(contains(message("[fit]\nx = " + std::string(ef::ini::kMaxLineLength + 10, '1') + "\n"),
                   "o.ini:2: line longer than"));
    const std::string garbage = message(std::string(5000, '\x01') + "\n");
    CHECK(contains(garbage, "o.ini:1: expected 'key = value'"));
    CHECK(garbage.size() < 200);
    CHECK(contains(error_of([&] { ef::ini::scan(dir.path.string(), rules); }, ef::ExitCode::usage), "it is a folder"));
}

TEST_CASE("fit config: counts above 2^32 are refused naming the key, not wrapped into range", "[limits]") {
    ef_test::TempDir dir;
    write(dir.file("d.csv"), kData);
    const std::string path = dir.file("f.ini");
    write(path, config("d.csv"));
    const auto message = [&](const std::vector<std::string>& overrides) {
        return error_of([&] { ef::load_fit_config(path, overrides); }, ef::ExitCode::usage);
    };

    CHECK(contains(message({"--fit.max_iterations=4294967297"}), "--fit.max_iterations: must be in 1..2147483647"));
    CHECK(contains(message({"--model.order=4294967296"}), "--model.order: must be in 0..20"));
    CHECK(contains(message({"--model.peaks=4294967297"}), "--model.peaks: must be in 1..20"));
    CHECK(contains(message({"--fit.chunk=4294967297"}), "--fit.chunk: must be in 0..2147483647"));
    CHECK(contains(message({"--run.threads=4294967297"}), "--run.threads: must be in 0..4096"));
    CHECK(contains(message({"--fit.replicas=-4"}), "--fit.replicas: must be in 0..2147483646, got -4"));
    CHECK(ef::load_fit_config(path, {"--fit.replicas=1e3"}).replicas == 1000);
}

TEST_CASE("fit config: replicas that cannot fit this machine's memory are refused with the largest that can",
          "[limits]") {
    ef_test::TempDir dir;
    write(dir.file("d.csv"), kData);
    const std::string path = dir.file("f.ini");
    write(path, config("d.csv", "[fit]\nreplicas = 1e12\n"));

    const std::string m = error_of([&] { ef::load_fit_config(path, {}); }, ef::ExitCode::usage);

    CHECK(contains(m, "f.ini:16: fit.replicas = 1e12 needs 80 TB of memory for /replicas"));
    CHECK(contains(m, "the largest this machine's memory (" +
                          ef::format_bytes(static_cast<double>(ef::memory_limit_bytes())) + ") allows is "));
}

TEST_CASE("fit config: a '#' glued to a formula reaches the formula, a blank-led '#' is a comment", "[limits]") {
    ef_test::TempDir dir;
    write(dir.file("d.csv"), kData);
    const std::string path = dir.file("f.ini");
    std::string text = config("d.csv");
    write(path, text.replace(text.find("a + b*x"), 7, "a + b*x # the line"));
    CHECK(ef::load_fit_config(path, {}).formula == "a + b*x");
    write(path, config("d.csv").replace(config("d.csv").find("a + b*x"), 7, "a + b*x#2"));
    CHECK(ef::load_fit_config(path, {}).formula == "a + b*x#2");  // the compiler names the column of '#'
}

TEST_CASE("data: a duplicated CSV column and fewer rows than free parameters are data errors", "[limits]") {
    ef_test::TempDir dir;
    const std::string path = dir.file("f.ini");
    write(path, config("d.csv"));
    write(dir.file("d.csv"), "x,y,s,y\n1,2,0.1,3\n2,3,0.1,4\n");
    const ef::FitConfig cfg = ef::load_fit_config(path, {});

    CHECK(contains(error_of([&] { ef::load_data(cfg); }, ef::ExitCode::data),
                   "d.csv:1: column 'y' appears twice in the header (columns 2 and 4)"));
    write(dir.file("d.csv"), "x,y,s\n1,2,0.1\n");
    CHECK(contains(error_of([&] { ef::load_data(cfg); }, ef::ExitCode::data),
                   "d.csv: 1 data row(s) for 2 free parameters"));
    write(dir.file("d.csv"), "x,y,s\n1,2,0.1\n2,3,0.1\n");
    CHECK(ef::load_data(cfg).n == 2);
}

TEST_CASE("capacity: byte counts read as people write them", "[limits]") {
    CHECK(ef::format_bytes(512) == "512 B");
    CHECK(ef::format_bytes(1.5e9) == "1.5 GB");
    CHECK(ef::format_bytes(8e13) == "80 TB");
    CHECK(ef::memory_limit_bytes() > 0);
    CHECK(ef::exceeds_memory(1e30));
    CHECK_FALSE(ef::exceeds_memory(1e3));
}
