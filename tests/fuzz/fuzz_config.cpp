// SPDX-License-Identifier: MIT
// Fuzz target: the fit config (INI pre-scan, Boost.Program_options, every key's conversion and
// check), through load_fit_config as `ensemblefit fit FILE [--key value ...]` calls it.
// Input: the INI file's bytes; after a NUL byte, one command-line token per line.
#include <cstdint>
#include <string>
#include <vector>

#include <ensemblefit/config/fit_config.hpp>

#include "tests/fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
    static ef::fuzz::ScratchFile file("fuzz.ini");
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    const size_t nul = bytes.find('\0');
    std::vector<std::string> overrides;
    if (nul != std::string::npos) {
        std::string token;
        for (size_t i = nul + 1; i <= bytes.size(); ++i) {
            if (i == bytes.size() || bytes[i] == '\n') {
                overrides.push_back(token);
                token.clear();
            } else {
                token += bytes[i];
            }
        }
    }
    const std::string& path =
        file.write(data, nul == std::string::npos ? size : nul);
    ef::fuzz::expect_only_user_errors([&] {
        const ef::FitConfig cfg = ef::load_fit_config(path, overrides);
        // What a run does with a config next: its canonical and resolved text go into the
        // output file, and messages name where keys were set.
        (void)cfg.canonical_text();
        (void)cfg.resolved_text();
        (void)cfg.param_names();
        for (const auto& [key, origin] : cfg.origins) (void)cfg.where(key);
    });
    return 0;
}
