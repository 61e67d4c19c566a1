// SPDX-License-Identifier: MIT
// Fuzz target: the CSV data reader through load_data, as `ensemblefit fit` reads [data].
// Input: the file's bytes. The first byte picks the columns the config names (one or two x
// columns; sigma a column or a constant), so both shapes of config are covered. An input that
// holds the HDF5 signature is skipped: it would fuzz the HDF5 library, not this reader.
#include <cstdint>
#include <cstring>
#include <string>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/io/data_table.hpp>

#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
    static ef::fuzz::ScratchFile file("fuzz.csv");
    if (size == 0) return 0;
    static const char kHdf5Signature[] = "\x89HDF\r\n\x1a\n";
    if (std::string_view(reinterpret_cast<const char*>(data), size).find(
            std::string_view(kHdf5Signature, 8)) != std::string_view::npos)
        return 0;
    const std::uint8_t shape = data[0];
    ef::FitConfig cfg;
    cfg.config_file = "fuzz.ini";
    cfg.data_file = file.write(data + 1, size - 1);
    cfg.x_columns = (shape & 1) ? std::vector<std::string>{"x", "t"} : std::vector<std::string>{"x"};
    cfg.y_column = "y";
    cfg.sigma_is_constant = (shape & 2) != 0;
    cfg.sigma = cfg.sigma_is_constant ? "0.5" : "s";
    cfg.sigma_constant = 0.5;
    ef::fuzz::expect_only_user_errors([&] {
        const ef::DataTable d = ef::load_data(cfg);
        if (d.n < 1 || d.x.size() != static_cast<size_t>(d.n) * static_cast<size_t>(d.nx) ||
            d.y.size() != static_cast<size_t>(d.n) || d.sigma.size() != static_cast<size_t>(d.n))
            ef::fuzz::finding("load_data returned a table whose sizes disagree");
    });
    return 0;
}
