// SPDX-License-Identifier: MIT
// The graceful stop's plumbing (src/run/stop_request.hpp): the handler only records the
// signal, the installation starts from no signal, and the resume command a user copies; the
// silence watch does not count a pause of its own process as another rank's silence.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "src/run/environment.hpp"
#include "src/run/run_failure.hpp"
#include "src/run/stop_request.hpp"

namespace {

void record(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    ef::record_command_line(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("a stop signal is recorded, not acted on, while StopSignals is installed", "[stop]") {
    {
        const ef::StopSignals signals;
        REQUIRE(ef::stop_signal() == 0);

        std::raise(SIGUSR1);  // without the handler this would end the test program

        CHECK(ef::stop_signal() == SIGUSR1);
        std::raise(SIGUSR1);  // a second SIGUSR1 is recorded again (only SIGTERM/SIGINT escalate)
        CHECK(ef::stop_signal() == SIGUSR1);
    }
    const ef::StopSignals again;  // a new run starts from no signal
    CHECK(ef::stop_signal() == 0);
}

TEST_CASE("the resume command drops --overwrite and --resume and adds one --resume", "[stop]") {
    record({"/opt/ef/bin/ensemblefit", "fit", "my.ini", "--overwrite", "--fit.seed", "3"});

    CHECK(ef::resume_command() == "/opt/ef/bin/ensemblefit fit my.ini --fit.seed 3 --resume");

    record({"ensemblefit", "reconstruct", "r.ini", "--resume", "--output.file=out.h5"});
    CHECK(ef::resume_command() == "ensemblefit reconstruct r.ini --output.file=out.h5 --resume");
}

TEST_CASE("the resume command quotes what a shell would split or expand", "[stop]") {
    record({"ensemblefit", "fit", "my config.ini", "--data.file", "it's.csv", "--model.formula", "a*exp(-b*x)", ""});

    CHECK(ef::resume_command() ==
          "ensemblefit fit 'my config.ini' --data.file 'it'\\''s.csv' --model.formula 'a*exp(-b*x)' '' --resume");
    CHECK(ef::signal_name(SIGTERM) == "SIGTERM");
    CHECK(ef::signal_name(SIGUSR1) == "SIGUSR1");
}

TEST_CASE("a polling loop's wait counts its polls, not a pause of its own process", "[stop]") {
    ef::PollClock clock;
    const double first = clock.tick();
    CHECK(first >= 0);
    CHECK(first < 1.0);
    CHECK_FALSE(clock.paused());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double polled = clock.tick();
    CHECK(polled >= first + 0.3);  // a gap under a second is waiting
    CHECK_FALSE(clock.paused());
    CHECK(clock.fresh());

    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // as if stopped for 1.1 s
    CHECK_FALSE(clock.fresh());  // a rank about to be named after this pause is not
    CHECK(clock.tick() == 0);    // the count starts again
    CHECK(clock.paused());
    CHECK(clock.fresh());
}
