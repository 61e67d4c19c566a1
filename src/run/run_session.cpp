// SPDX-License-Identifier: MIT
// The one order of every run command (RunSession::run); the problems (src/fit, src/recon)
// supply its steps' content through RunProblem.
#include "src/run/run_session.hpp"

#include <thread>

#include <ensemblefit/core/config.hpp>

#include "src/core/thread_name.hpp"
#include "src/run/run_failure.hpp"
#include "src/run/stop_request.hpp"

namespace ef {

/// Everything before the first computation, identical on every rank: input errors are thrown
/// identically everywhere, or agreed by collective(), and end the run with one line.
void RunSession::set_up(RunProblem& problem) {
    RunState& s = state_;
    collective(s.ctx, [&] { s.settings = problem.load_config(); });
    s.binding = apply_binding(s.ctx, s.settings.bind);  // before any OpenMP region: threads inherit the cores
    const std::string& want = s.settings.workers_of(s.ctx.rank());
    std::jthread context;  // the GPU's context (cuda_create_context), made while the input is read
    if (EF_HAVE_CUDA && want != "cpu" && problem.prewarm_device())
        context = std::jthread([&s, want] {
            name_this_thread("ef-gpu-context");
            const DevicePlan d = choose_device(want, s.ctx);
            if (d.kind == WorkerKind::gpu) cuda_create_context(d.device);
        });
    collective(s.ctx, [&] {
        s.threads = resolve_threads(s.settings.threads, s.ctx.local_size());
        problem.read_input();
    });
    if (context.joinable()) context.join();
    s.device = choose_device(want, s.ctx, problem.gpu_capable());  // the one decision of the worker kind
    problem.make_worker();
    problem.worker_ready();
    s.placement = gather_placement(s.ctx, problem.worker_description(), s.threads.threads, s.binding, s.gpu());
}

/// Results, timing and the close of a run that computed (stopped or not).
void RunSession::finish(RunProblem& problem) {
    if (!problem.stopped()) problem.write_results();  // a stopped run's output is final as it is
    if (problem.reports_timing()) report_run_timing(state_, problem.timing_report());
    problem.close();
    if (problem.stopped()) problem.report_stopped();
}

void RunSession::run(RunProblem& problem) {
    const StopSignals signals;  // SIGUSR1, SIGTERM, SIGINT: stop at the next unit (src/run/stop_request.hpp)
    set_up(problem);
    const OutputTarget out = problem.output_target();
    const OutputAction action = check_output(state_.ctx, out.path, out.where, state_.args, true, out.inputs,
                                              out.companions);
    const bool work_left = problem.open_output(action);
    problem.print_plan(state_.args.dry_run ? PlanCase::dry_run : work_left ? PlanCase::run : PlanCase::nothing_to_do);
    if (state_.args.dry_run || !work_left) return;
    problem.before_compute();
    try {
        problem.compute();
        finish(problem);
    } catch (const AgreedFailure& e) {
        throw Error(e.code(), e.what());  // agreed on every rank: one line from rank 0, no abort
    } catch (const std::exception& e) {
        problem.abort(e);  // some ranks failed mid-run; the others would wait in a collective
    }
}

}  // namespace ef
