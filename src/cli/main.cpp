// SPDX-License-Identifier: MIT
// The ensemblefit command line: subcommands over one MPI_Init/Finalize.
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/core/config.hpp>
#include <ensemblefit/core/error.hpp>
#include <ensemblefit/fit/ensemble_run.hpp>

#include "src/cli/commands.hpp"
#include "src/config/capacity.hpp"
#include "src/core/text.hpp"
#include "src/run/environment.hpp"
#include "src/run/output_guard.hpp"
#include "src/run/run_args.hpp"
#include "src/run/setup_trace.hpp"
#include "src/run/stop_request.hpp"

namespace po = boost::program_options;

namespace ef {
namespace {

const char* kUsage =
    "usage: ensemblefit COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  fit CONFIG.ini [--section.key VALUE ...] [--shard i/n | --shard auto] [--resume]\n"
    "                 bootstrap ensemble fit of the configured model (run under mpirun)\n"
    "  merge -o OUT.h5 SHARD.h5 ...   join shard files into one result\n";

void print_version() {
    std::printf("ensemblefit %s (%s)\nbuild: %s, %s, CUDA %s\n", EF_VERSION, EF_GIT_DESCRIBE, EF_BUILD_TYPE,
                EF_CXX_COMPILER, EF_HAVE_CUDA ? "on (architectures " EF_CUDA_ARCHITECTURES ")" : "off");
}

void fit_help() {
    std::printf(
        "usage: ensemblefit fit CONFIG.ini [options] [--section.key VALUE ...]\n\n"
        "options:\n"
        "  --shard i/n     fit only shard i of n (0-based) of replicas 1..R; shard 0 also fits\n"
        "                  replica 0. 'auto' takes i and n from SLURM_ARRAY_TASK_ID/_COUNT\n"
        "  --resume        finish an interrupted run: fit only the replicas the output lacks\n"
        "  --overwrite     replace an existing output file (refused otherwise)\n"
        "  --dry-run       read and check everything, print the plan and cost and the bounds\n"
        "                  on rank 0 (dispatcher units/s, writer rows/s), fit nothing\n"
        "  --ranks N       with --dry-run: the bounds for N ranks instead of this launch's\n"
        "  --workers KIND  auto | cpu | gpu (same as --run.workers)\n"
        "  --policy NAME   static | dynamic | guided | weighted (same as --sched.policy)\n"
        "  --progress-interval S  seconds between progress lines when not on a terminal (5)\n"
        "  --baseline F.h5 a run of the same problem on fewer ranks: adds speedup, computation\n"
        "                  scalability and global efficiency to the timing report\n"
        "  --predicted F   a prediction of `ensemblefit advise -o F`: stored beside /timing\n"
        "  --trace F.json  every rank's phases as a Chrome trace (Perfetto, chrome://tracing)\n"
        "  --debug.slowdown RANK:FACTOR[,...]  make those ranks' workers FACTOR (1..1000) times slower\n"
        "                  (they wait in proportion to their real compute time)\n"
        "  --debug.slow-writes S  rank 0's results writer waits S seconds inside each write,\n"
        "                  and writes blocks of 32 rows with a backlog of 64 (a slow disk)\n"
        "  --debug.hold-creating S  rank 0 waits S seconds between creating a new output under\n"
        "                  its temporary name and renaming it\n"
        "  --debug.unit-sleep S  every rank sleeps S seconds after each unit and reports no speed,\n"
        "                  so units keep fit.chunk replicas (rank 0's dispatcher under load)\n"
        "  -h, --help      this text\n\n%s",
        fit_config_help().c_str());
}

/// A message as one line of at most 1000 characters (a value the user gave may hold newlines).
std::string one_line(const std::string& message) { return excerpt(message, 1000); }

/// "fit", "simulate ptycho": the command as typed, for the last-resort messages.
std::string command_name(int argc, char** argv) {
    std::string name = argc > 1 ? argv[1] : "";
    if (argc > 2 && argv[2][0] != '-' && (name == "simulate" || name == "export")) name += std::string(" ") + argv[2];
    return name;
}

int cmd_fit(const std::vector<std::string>& args, const MpiContext& ctx) {
    FitRunOptions opt;
    auto config_key = [&](const std::string& key) {
        return [&opt, key](const std::string& v) { opt.overrides.push_back("--" + key + "=" + v); };
    };
    const std::vector<ArgOption> options = {
        {"--shard", true, [&](const std::string& v) { opt.shard = v; }},
        {"--workers", true, config_key("run.workers")},  // short forms of config keys
        {"--policy", true, config_key("sched.policy")},
        {"--baseline", true, [&](const std::string& v) { opt.baseline = v; }},
        {"--debug.slowdown", true, [&](const std::string& v) { opt.slowdown = v; }},
        {"--debug.slow-writes", true,
         [&](const std::string& v) {
             opt.slow_writes = parse_number_arg("--debug.slow-writes", v);
             if (!(opt.slow_writes >= 0 && opt.slow_writes <= 3600))
                 throw usage_error("--debug.slow-writes: expected seconds in 0..3600");
         }},
        {"--debug.hold-creating", true,
         [&](const std::string& v) {
             opt.hold_creating = parse_number_arg("--debug.hold-creating", v);
             if (!(opt.hold_creating >= 0 && opt.hold_creating <= 3600))
                 throw usage_error("--debug.hold-creating: expected seconds in 0..3600");
         }},
        {"--ranks", true,
         [&](const std::string& v) {
             const double n = parse_number_arg("--ranks", v);
             if (!(n >= 1 && n <= 1e7 && n == std::floor(n)))
                 throw usage_error("--ranks: expected a whole number of ranks in 1..10000000, got '" + excerpt(v) + "'");
             opt.bound_ranks = static_cast<int>(n);
         }},
        {"--debug.unit-sleep", true,
         [&](const std::string& v) {
             opt.unit_sleep = parse_number_arg("--debug.unit-sleep", v);
             if (!(opt.unit_sleep >= 0 && opt.unit_sleep <= 60))
                 throw usage_error("--debug.unit-sleep: expected seconds in 0..60");
         }},
        {"--progress-interval", true,
         [&](const std::string& v) {
             opt.progress_interval = parse_number_arg("--progress-interval", v);
             if (!(opt.progress_interval >= 0)) throw usage_error("--progress-interval: expected seconds >= 0");
         }},
    };
    if (!parse_run_args("fit", args, true, options, opt)) {
        if (ctx.is_root()) fit_help();
        return 0;
    }
    if (opt.bound_ranks > 0 && !opt.dry_run) throw usage_error("fit: --ranks belongs to --dry-run (it runs nothing)");
    run_fit(opt, ctx);
    return 0;
}

int cmd_merge(const std::vector<std::string>& args, const MpiContext& ctx) {
    po::options_description desc("usage: ensemblefit merge -o OUT.h5 SHARD.h5 ...\n\noptions");
    std::string output;
    std::vector<std::string> inputs;
    desc.add_options()("help,h", "this text")("output,o", po::value<std::string>(&output), "merged output file")(
        "overwrite", "replace an existing output file")("inputs", po::value<std::vector<std::string>>(&inputs),
                                                          "shard files, in any order");
    po::positional_options_description pos;
    pos.add("inputs", -1);
    po::variables_map vm;
    if (!parse_program_options("merge", args, desc, pos, vm, ctx)) return 0;
    if (output.empty()) throw usage_error("merge: -o OUT.h5 is required");
    if (ctx.is_root()) run_merge(output, inputs, vm.count("overwrite") > 0);
    return 0;
}

}  // namespace
}  // namespace ef

int main(int argc, char** argv) {
    using namespace ef;
    // Rank 0 runs a dispatcher thread beside its compute threads; only one thread makes MPI
    // calls at a time, so SERIALIZED is enough.
    int provided = 0;
    record_command_line(argc, argv);
    auto t0 = std::chrono::steady_clock::now();
    const auto seconds_since = [](std::chrono::steady_clock::time_point& t) {
        const auto now = std::chrono::steady_clock::now();
        return std::chrono::duration<double>(now - std::exchange(t, now)).count();
    };
    if (argc > 1 && std::string(argv[1]) == "job-check")  // no MPI (commands.hpp says why)
        return run_job_check_without_mpi(std::vector<std::string>(argv + 2, argv + argc));
    prepare_mpi_singleton();  // no launcher: no orted, no UCX (src/run/environment.hpp)
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    int code = 0;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    trace_process_step("MPI_Init", seconds_since(t0), rank);  // EF_SETUP_TRACE: where start-up goes
    if (provided < MPI_THREAD_SERIALIZED) {
        if (rank == 0)
            std::fprintf(stderr, "ensemblefit: error: the MPI library does not support MPI_THREAD_SERIALIZED\n");
        MPI_Finalize();
        return 1;
    }
    try {
        MpiContext ctx;
        const std::vector<std::string> args(argv + (argc > 1 ? 2 : 1), argv + argc);
        const std::string cmd = argc > 1 ? argv[1] : "";
        if (cmd.empty() || cmd == "-h" || cmd == "--help" || cmd == "help") {
            if (rank == 0)
                std::printf("%s%s  --version      version and build options\n"
                            "  COMMAND --help options of one command\n",
                            kUsage, extra_command_help().c_str());
            code = cmd.empty() ? 2 : 0;
        } else if (cmd == "--version" || cmd == "version") {
            if (rank == 0) print_version();
        } else if (cmd == "fit") {
            code = cmd_fit(args, ctx);
        } else if (cmd == "merge") {
            code = cmd_merge(args, ctx);
        } else if (!run_extra_command(cmd, args, ctx, code)) {
            throw usage_error("unknown command '" + cmd + "' (see ensemblefit --help)");
        }
    } catch (const Error& e) {
        // Input errors are found identically on every rank; one line from rank 0 is enough.
        if (rank == 0) std::fprintf(stderr, "ensemblefit: error: %s\n", one_line(e.what()).c_str());
        code = static_cast<int>(e.code());
    } catch (const std::bad_alloc&) {
        // Every size a user sets is checked against the memory where it is read; this is the
        // last resort for one that escaped (or a machine shared with others): exit 3, as the
        // input asks more than the machine holds.
        std::fprintf(stderr, "ensemblefit: error on rank %d: memory ran out during '%s' (%s of memory on this machine)\n",
                     rank, one_line(command_name(argc, argv)).c_str(),
                     format_bytes(static_cast<double>(memory_limit_bytes())).c_str());
        code = static_cast<int>(ExitCode::data);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ensemblefit: error on rank %d: %s\n", rank, one_line(e.what()).c_str());
        code = 1;
    }
    if (code == 0 && stopped_early()) code = static_cast<int>(ExitCode::stopped);
    release_output_locks();  // every output is closed; before a launcher may kill this rank
    std::fflush(stdout);
    trace_process_step("the command (its objects freed)", seconds_since(t0), rank);
    MPI_Finalize();
    trace_process_step("MPI_Finalize", seconds_since(t0), rank);
    return code;
}
