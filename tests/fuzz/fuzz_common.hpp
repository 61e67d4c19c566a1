// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <unistd.h>

#include <ensemblefit/core/error.hpp>

/**
 * What the parser fuzz targets share. Each target feeds its bytes through the entry point the
 * program uses (a file on disk for the config and the CSV reader, a string for the formula) and
 * accepts the errors the program documents for bad input: ef::Error with exit code 2 or 3
 * (docs/architecture.md, "Errors and exit codes"). Anything else is a finding: an ef::Error
 * with exit code 1 (a bug by definition), any other exception, a crash or a sanitizer report
 * (fatal under EF_SANITIZE), or a hang (libFuzzer's -timeout). Built with libFuzzer under
 * EF_FUZZ, or with replay_main.cpp, which runs the corpus, in the normal build.
 */
namespace ef::fuzz {

/// Ends the process loudly: libFuzzer saves the input that got here as a crash artifact.
[[noreturn]] inline void finding(const std::string& what) {
    std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
    std::abort();
}

/// Runs `body`; an ef::Error meant for the user (exit 2 or 3) is fine, anything else a finding.
template <class Body>
void expect_only_user_errors(Body&& body) {
    try {
        body();
    } catch (const ef::Error& e) {
        if (e.code() != ef::ExitCode::usage && e.code() != ef::ExitCode::data)
            finding(std::string("ef::Error with exit code 1 (a bug): ") + e.what());
    } catch (const std::exception& e) {
        finding(std::string("unexpected exception: ") + e.what());
    } catch (...) {
        finding("unexpected exception of unknown type");
    }
}

/// A file with the given bytes, in a folder private to this process, rewritten per input.
class ScratchFile {
   public:
    explicit ScratchFile(const char* name) {
        const char* tmp = std::getenv("TMPDIR");
        std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/ef-fuzz-XXXXXX";
        if (!mkdtemp(pattern.data())) finding("cannot create a scratch folder under " + pattern);
        dir_ = pattern;
        path_ = dir_ + "/" + name;
    }
    ~ScratchFile() {
        std::remove(path_.c_str());
        rmdir(dir_.c_str());
    }
    ScratchFile(const ScratchFile&) = delete;
    ScratchFile& operator=(const ScratchFile&) = delete;

    const std::string& write(const std::uint8_t* data, size_t size) {
        std::ofstream out(path_, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
        if (!out) finding("cannot write " + path_);
        return path_;
    }
    const std::string& dir() const { return dir_; }

   private:
    std::string dir_;
    std::string path_;
};

}  // namespace ef::fuzz
