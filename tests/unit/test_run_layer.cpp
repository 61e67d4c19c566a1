// SPDX-License-Identifier: MIT
// The run layer's decisions (src/run): the [run] keys read once (RunSettings, both configs
// alike), the worker kind and threads of a rank (placement), and the output guard's answer for
// a new, an existing, an --overwrite and a --resume output.
#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/recon/recon_config.hpp>
#include <ensemblefit/run/run_settings.hpp>

#include "src/io/h5.hpp"
#include "src/run/output_guard.hpp"
#include "src/run/placement.hpp"
#include "temp_dir.hpp"

namespace {

/// parse_run_settings over `values` (unset keys: the configs' defaults), places "f.ini:KEY".
ef::RunSettings settings_of(const std::map<std::string, std::string>& values) {
    const std::map<std::string, std::string> defaults = {
        {"run.workers", "auto"}, {"run.threads", "0"}, {"run.bind", "auto"}, {"run.heartbeat_timeout", "300"}};
    ef::SettingsSource source;
    source.get = [&](const std::string& key) { return values.count(key) ? values.at(key) : defaults.at(key); };
    source.where = [](const std::string& key) { return "f.ini:7: " + key; };
    return ef::parse_run_settings(source);
}

std::string settings_error(const std::map<std::string, std::string>& values) {
    try {
        settings_of(values);
    } catch (const ef::Error& e) {
        CHECK(e.code() == ef::ExitCode::usage);
        return e.what();
    }
    return "no error";
}

/// A fit config and a reconstruction config with the same [run] section.
struct TwoConfigs {
    ef_test::TempDir dir;
    std::string fit, recon;
    explicit TwoConfigs(const std::string& run) {
        fit = dir.file("fit.ini");
        recon = dir.file("recon.ini");
        std::ofstream(fit) << "[data]\nfile = d.csv\nsigma = 1\n[model]\nname = linear\n[param.a]\nstart = 1\n"
                              "[param.b]\nstart = 0\n[output]\nfile = o.h5\n[run]\n"
                           << run;
        std::ofstream(recon) << "[data]\nfile = d.h5\n[output]\nfile = o.h5\n[solver]\niterations = 1\n[run]\n"
                                "balance = equal\n"
                             << run;
    }
};

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const ef::Error& e) {
        CHECK(e.code() == ef::ExitCode::usage);
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("RunSettings: defaults, a per-rank worker list, threads, bind and heartbeat", "[run][settings]") {
    const ef::RunSettings d = settings_of({});
    const ef::RunSettings s = settings_of({{"run.workers", "gpu, cpu,cpu"},
                                           {"run.threads", "8"},
                                           {"run.bind", "cores"},
                                           {"run.heartbeat_timeout", "0"}});

    CHECK(d.workers == std::vector<std::string>{"auto"});
    CHECK(d.workers_of(5) == "auto");
    CHECK(d.threads == 0);
    CHECK(d.bind == "auto");
    CHECK(d.heartbeat_timeout == 300);
    CHECK(s.workers == std::vector<std::string>{"gpu", "cpu", "cpu"});
    CHECK(s.workers_of(0) == "gpu");
    CHECK(s.workers_of(2) == "cpu");
    CHECK(s.workers_of(9) == "cpu");  // the last repeats
    CHECK(s.workers_text() == "gpu,cpu,cpu");
    CHECK(s.threads == 8);
    CHECK(s.bind == "cores");
    CHECK(s.heartbeat_timeout == 0);
}

TEST_CASE("RunSettings: a bad value is one usage error naming the place, the key and the allowed values",
          "[run][settings]") {
    CHECK(settings_error({{"run.workers", "tpu"}}) ==
          "f.ini:7: run.workers: unknown worker kind 'tpu' (allowed: auto, cpu, gpu, or a comma-separated list of them)");
    CHECK(settings_error({{"run.workers", "gpu,,cpu"}}) ==
          "f.ini:7: run.workers: unknown worker kind '' (allowed: auto, cpu, gpu, or a comma-separated list of them)");
    CHECK(settings_error({{"run.workers", ""}}) == "f.ini:7: run.workers: empty");
    CHECK(settings_error({{"run.threads", "4097"}}).find("f.ini:7: run.threads: must be in 0..4096") == 0);
    CHECK(settings_error({{"run.threads", "two"}}).find("f.ini:7: run.threads: expected an integer") == 0);
    CHECK(settings_error({{"run.bind", "numa"}}) ==
          "f.ini:7: run.bind: unknown binding 'numa' (allowed: auto, none, cores)");
    CHECK(settings_error({{"run.heartbeat_timeout", "-3"}}) ==
          "f.ini:7: run.heartbeat_timeout: must be seconds in 0..1e6 (0 = never), got '-3'");
    CHECK(settings_error({{"run.heartbeat_timeout", "inf"}}) ==
          "f.ini:7: run.heartbeat_timeout: must be seconds in 0..1e6 (0 = never), got 'inf'");
    CHECK(settings_error({{"run.heartbeat_timeout", "abc"}}).find("f.ini:7: run.heartbeat_timeout: expected a number") ==
          0);
}

TEST_CASE("RunSettings: fit and reconstruct read [run] alike, with the same rule and messages", "[run][settings]") {
    const TwoConfigs good("workers = gpu,cpu\nthreads = 3\nbind = none\nheartbeat_timeout = 60\n");
    const TwoConfigs bad("workers = cpu,fpga\n");

    const ef::RunSettings f = ef::load_fit_config(good.fit, {}).run;
    const ef::RunSettings r = ef::load_recon_config(good.recon, {}).run;
    const ef::RunSettings o = ef::load_fit_config(good.fit, {"--run.workers=cpu"}).run;

    CHECK(f.workers == std::vector<std::string>{"gpu", "cpu"});
    CHECK(r.workers == f.workers);
    CHECK((f.threads == 3 && r.threads == 3 && f.bind == "none" && r.bind == "none"));
    CHECK((f.heartbeat_timeout == 60 && r.heartbeat_timeout == 60));
    CHECK(o.workers == std::vector<std::string>{"cpu"});
    const std::string tail = ": run.workers: unknown worker kind 'fpga' (allowed: auto, cpu, gpu, or a "
                             "comma-separated list of them)";
    CHECK(error_of([&] { ef::load_fit_config(bad.fit, {}); }) == bad.fit + ":13" + tail);
    CHECK(error_of([&] { ef::load_recon_config(bad.recon, {}); }) == bad.recon + ":9" + tail);
    CHECK(error_of([&] { ef::load_recon_config(good.recon, {"--run.heartbeat_timeout=2e6"}); }) ==
          "--run.heartbeat_timeout: must be seconds in 0..1e6 (0 = never), got '2e6'");
}

TEST_CASE("placement: the worker kind from run.workers, the GPUs seen and what the problem can run", "[run][placement]") {
    using ef::WorkerKind;

    const ef::DevicePlan auto_none = ef::choose_device("auto", 0, 3, true);
    const ef::DevicePlan auto_two = ef::choose_device("auto", 2, 3, true);
    const ef::DevicePlan auto_cpu_only = ef::choose_device("auto", 2, 3, false);
    const ef::DevicePlan cpu_two = ef::choose_device("cpu", 2, 0, true);
    const ef::DevicePlan gpu_none = ef::choose_device("gpu", 0, 1, true);
    const ef::DevicePlan gpu_cpu_only = ef::choose_device("gpu", 4, 6, false);

    CHECK(auto_none.kind == WorkerKind::cpu);
    CHECK(auto_two.kind == WorkerKind::gpu);
    CHECK(auto_two.device == 1);  // round-robin over the node's GPUs by node-local rank
    CHECK(auto_cpu_only.kind == WorkerKind::cpu);  // a plugin without GPU code: auto runs it on the CPU
    CHECK(cpu_two.kind == WorkerKind::cpu);
    CHECK(gpu_none.kind == WorkerKind::gpu);  // asked for: the worker's maker refuses it, never a silent CPU
    CHECK(gpu_cpu_only.kind == WorkerKind::gpu);
    CHECK(gpu_cpu_only.device == 2);
}

TEST_CASE("placement: threads per rank from run.threads, and the oversubscription warning", "[run][placement]") {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

    const ef::ThreadPlan three = ef::resolve_threads(3, 1);
    const ef::ThreadPlan crowded = ef::resolve_threads(cores, 2);
    const ef::ThreadPlan automatic = ef::resolve_threads(0, 1);

    CHECK(three.threads == 3);
    CHECK(three.source == "run.threads");
    CHECK(!crowded.warning.empty());
    CHECK(crowded.warning.find("oversubscribed: 2 rank(s) x " + std::to_string(cores)) == 0);
    CHECK(automatic.threads >= 1);
    CHECK(automatic.source != "run.threads");
    CHECK_THROWS_AS(ef::resolve_threads(5000, 1), ef::Error);
}

TEST_CASE("placement: ranks counted and warned per node (MPI's), not per host name", "[run][placement]") {
    // rank, host, worker, threads, cores, binding, gpu, node: two nodes that share a host name
    // (containers) and give their ranks the same core numbers.
    const std::vector<std::string> two_nodes = {"0\tbox\tcpu\t1\t0\tauto, free\t-\t0",
                                                "1\tbox\tcpu\t1\t1\tauto, free\t-\t0",
                                                "2\tbox\tcpu\t1\t0\tauto, free\t-\t1",
                                                "3\tbox\tcpu\t1\t1\tauto, free\t-\t1"};
    std::vector<std::string> one_node = two_nodes;
    for (std::string& row : one_node) row.back() = '0';
    // A file written before the node column: its rows are grouped by host, as they were.
    std::vector<std::string> old_rows;
    for (const std::string& row : two_nodes) old_rows.push_back(row.substr(0, row.rfind('\t')));

    const std::string counted = ef::ranks_per_node(two_nodes);
    const std::vector<std::string> apart = ef::placement_warnings(two_nodes);
    const std::vector<std::string> together = ef::placement_warnings(one_node);
    const std::vector<std::string> old = ef::placement_warnings(old_rows);

    CHECK(counted == "ranks per node (2 nodes): box 2 (ranks 0-1), box 2 (ranks 2-3)");
    CHECK(ef::ranks_per_node(one_node).empty());
    CHECK(ef::ranks_per_node(old_rows).empty());
    CHECK(apart.empty());
    REQUIRE(together.size() == 1);
    CHECK(together[0].find("ranks 0, 1, 2, 3 on box share cores 0-1 ") == 0);
    REQUIRE(old.size() == 1);
    CHECK(old[0] == together[0]);
}

TEST_CASE("output guard: a new, an existing, an --overwrite and a --resume output", "[run][output]") {
    ef_test::TempDir dir;
    const std::string fresh = dir.file("new.h5"), text = dir.file("text.h5"), h5 = dir.file("old.h5");
    std::ofstream(text) << "not hdf5\n";
    ef::h5::File::create(h5).close();
    ef::RunArgs plain, overwrite, resume;
    overwrite.overwrite = true;
    resume.resume = true;

    CHECK(ef::decide_output(fresh, "f.ini:3: output.file", plain, true, {}) == ef::OutputAction::create);
    CHECK(ef::decide_output(fresh, "f.ini:3: output.file", resume, true, {}) == ef::OutputAction::create);
    CHECK(ef::decide_output(h5, "f.ini:3: output.file", overwrite, true, {}) == ef::OutputAction::replace);
    CHECK(ef::decide_output(h5, "f.ini:3: output.file", resume, true, {}) == ef::OutputAction::resume);
    CHECK(error_of([&] { ef::decide_output(h5, "f.ini:3: output.file", plain, true, {}); }) ==
          "f.ini:3: output.file: '" + h5 + "' exists; pass --resume to finish it or --overwrite to replace it");
    CHECK(error_of([&] { ef::decide_output(h5, "merge: -o", plain, false, {}); }) ==
          "merge: -o: '" + h5 + "' exists; pass --overwrite to replace it");
    CHECK(error_of([&] { ef::decide_output(h5, "f.ini:3: output.file", overwrite, true, {h5}); })
              .find("is the input") != std::string::npos);
    CHECK(error_of([&] { ef::decide_output(dir.path.string(), "f.ini:3: output.file", overwrite, true, {}); })
              .find("is a folder") != std::string::npos);
    try {
        ef::decide_output(text, "f.ini:3: output.file", resume, true, {});
        FAIL("no error");
    } catch (const ef::Error& e) {
        CHECK(e.code() == ef::ExitCode::data);
        CHECK(std::string(e.what()).find("is not an HDF5 file, so --resume cannot finish it") != std::string::npos);
    }
    ef::release_output_locks();
}
