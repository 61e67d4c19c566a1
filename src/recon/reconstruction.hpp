// SPDX-License-Identifier: MIT
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ensemblefit/comm/mpi_context.hpp>
#include <ensemblefit/recon/ptycho_dataset.hpp>
#include <ensemblefit/recon/recon_config.hpp>
#include <ensemblefit/recon/recon_worker.hpp>
#include <ensemblefit/recon/reconstruction.hpp>
#include <ensemblefit/sched/phase_timer.hpp>

#include "kernels/recon/ptycho_math.hpp"
#include "src/io/h5.hpp"
#include "src/recon/loss_trend.hpp"
#include "src/recon/phase_error.hpp"
#include "src/recon/probe_modes.hpp"
#include "src/recon/recon_checkpoint.hpp"
#include "src/recon/recon_plan.hpp"
#include "src/run/heartbeat.hpp"
#include "src/run/placement.hpp"
#include "src/run/run_failure.hpp"
#include "src/run/run_session.hpp"
#include "src/run/trace.hpp"
#include "src/sched/batch_schedule.hpp"

namespace ef::recon {

/// What one iteration's batch steps share, and what they add up.
struct IterationSteps {
    bool probe_on = false, pos_on = false;
    double rate = 1;  ///< learning-rate factor (solver.decay_start)
    LossKind loss_kind = LossKind::amplitude;
    double loss_sum = 0;       ///< of the batches' losses
    double grad_seconds = 0;   ///< in gradient passes
    double speed_seconds = 0;  ///< the same, as the rank's speed is measured (see batches_deferred)
    std::int64_t done = 0;     ///< positions
    std::int64_t batches = 0;  ///< batches with positions of this rank
};

/// Whether the ranks can sum gradients on their GPUs, and why not.
struct DeviceSumCheck {
    bool all_gpu = false;  ///< every rank is a GPU worker
    bool peer = false;     ///< peer sums may be tried (every rank on one host, run.allreduce allows)
    bool ok = false;       ///< NCCL started on every rank
    std::string why;       ///< why not, when !ok
};

/// Global sums of a batch's loss terms and the pattern pixels they cover.
struct LossSums {
    double a = 0, b = 0;
    double pixels = 0;
};

/**
 * One ptychographic reconstruction on this rank as the run layer's RunProblem (internal;
 * run_reconstruct() hands it to a RunSession, which calls its steps in the run's one order;
 * docs/reconstruction.md explains the method). Set-up is
 * identical on every rank, so input errors are thrown identically everywhere; rank 0 writes the
 * output. The steps live in four files: reconstruction.cpp (set-up and the model's start),
 * reconstruction_steps.cpp (the iterations, batch steps and shares),
 * reconstruction_output.cpp (output and timing) and recon_checkpoint.cpp (checkpoints,
 * --resume, the graceful stop's agreement).
 */
class Reconstruction final : public RunProblem {
   public:
    Reconstruction(const ReconRunOptions& opt, RunState& run)
        : opt_(opt),
          run_(run),
          ctx_(run.ctx),
          timer_(run.timer),
          timeline_(run.timeline),
          threads_(run.threads),
          placement_(run.placement) {}

    // The steps RunSession calls, in its order (src/run/run_session.hpp).
    RunSettings load_config() override;
    void read_input() override;
    void make_worker() override;
    std::string worker_description() const override { return worker_->describe(); }
    void worker_ready() override;
    OutputTarget output_target() const override;
    bool open_output(OutputAction action) override;
    void print_plan(PlanCase) const override { print_plan(); }
    void before_compute() override { load_share(); }
    void compute() override {
        initial_model();
        iterate();
    }
    bool stopped() const override { return stopped_ != 0; }
    void write_results() override;
    bool reports_timing() const override { return stopped_ == 0; }
    TimingReport timing_report() override;
    void close() override;
    void report_stopped() const override { report_stop(); }
    [[noreturn]] void abort(const std::exception& e) override { abort_run(ctx_, e); }

   private:
    // reconstruction.cpp
    void print_plan() const;
    void load_share();
    void initial_model();
    // reconstruction_steps.cpp
    void iterate();

    // ---- set-up (reconstruction.cpp) --------------------------------------------------------
    void set_up_device_sum();
    DeviceSumCheck check_device_sum();
    ReconWorkerOptions worker_options(int device) const;
    void read_mean_pattern(const std::vector<float>& share);
    void decide_detector(const std::vector<float>& frames, std::int64_t count, std::int64_t negatives);
    std::vector<Complex> initial_probe(double defocus);
    void choose_defocus();
    void set_flat_object();
    double trial_loss(double defocus);
    void set_roi();

    // ---- iterations (reconstruction_steps.cpp) -----------------------------------------------
    IterationSteps steps_of(int it) const;
    IterationSteps iteration_batches(int it);
    bool end_iteration(int it, const IterationSteps& st, double wall0);
    ReconBatch assemble(const std::vector<std::int64_t>& members) const;
    std::int64_t batch_layout(std::int64_t t, std::vector<int>& counts, std::vector<int>& starts) const;
    ReconUpdate next_update(const IterationSteps& st, double scale);
    void batch_step(int it, std::int64_t t, IterationSteps& st);
    ReconBatchTerms batch_gradients(const ReconBatch& batch, IterationSteps& st);
    LossSums sum_over_ranks(std::int64_t t, const ReconBatchTerms& terms, const IterationSteps& st);
    void batches_deferred(int it, std::int64_t nb, IterationSteps& st);
    void account_device_time(const ReconDeferredResults& res, IterationSteps& st);
    void constrain_probe();
    void update_positions(const std::vector<std::int64_t>& members, const double* grad, double scale, std::int64_t t,
                          double rate);
    void sync_positions();
    std::int64_t position_steps(int it);
    void bound_travel(std::int64_t idx);
    void rebalance();
    void load_share(const std::vector<std::int64_t>& bounds);
    void report_residence();
    std::int64_t gradient_doubles(bool with_probe) const;

    // ---- checkpoints, --resume, graceful stop (recon_checkpoint.cpp) ---------------------------
    void check_resume(bool resume);
    void compare_config(const std::string& stored) const;
    void compare_data(const h5::File& f) const;
    void restore_checkpoint();
    void read_checkpoint(const h5::File& f);
    void check_mean_total(double stored);
    void write_checkpoint(h5::File& f);
    Boundary at_boundary(int it);
    void report_stop() const;

    // ---- output (reconstruction_output.cpp) --------------------------------------------------
    void report(int it);
    PhaseError compare_truth();
    void write_output(bool final);
    void write_previews(const std::vector<Complex>& obj, const std::vector<Complex>& probe);
    void print_traces() const;
    void print_stream_timing(const ReconStreamTiming& s) const;
    double seconds_per_iteration() const;

    const ReconRunOptions& opt_;
    RunState& run_;  // the session's decisions: settings, threads, device, placement
    const MpiContext& ctx_;
    PhaseTimer& timer_;
    PhaseTrace& timeline_;  // --trace
    ReconConfig cfg_;
    PtychoDataset ds_;
    std::int64_t n_ = 0;  // pixels per pattern
    ReconPlan plan_;  // the decisions made once (recon_plan.hpp): sub-pixel shifts, slices, sums, deferred steps
    const ThreadPlan& threads_;
    int device_ = -1;      // this rank's GPU, -1 for a CPU worker
    std::unique_ptr<ReconWorker> worker_;
    std::unique_ptr<Heartbeat> heartbeat_;  // [run] heartbeat_timeout: the batch steps' barriers, watched
    const std::vector<std::string>& placement_;
    std::unique_ptr<BatchSchedule> schedule_;
    std::vector<std::int64_t> bounds_;  // strata per rank: rank r owns [bounds_[r], bounds_[r + 1])
    std::int64_t my_first_ = 0, my_count_ = 0;
    std::vector<double> mean_pattern_;
    double mean_total_ = 0;
    bool have_mean_ = false;
    std::string residence_;  // the worker's last pattern_residence() note (report_residence())
    std::vector<double> pos_m_, pos_v_;  // the positions' Adam moments
    std::vector<double> pos_start_;      // the positions as read: what positions.max_travel bounds from
    // per position (2 entries, the first counts): how often bound_travel() moved it since the run
    // (re)started; a double so that sync_positions() gathers it with the positions
    std::vector<double> pos_moved_;
    std::vector<Complex> truth_;
    int roi_[4] = {0, 0, 0, 0};
    std::vector<std::vector<double>> debug_speeds_;  // --debug.speeds: stand-ins for measured speeds
    // accumulated over the run
    std::vector<double> loss_, iteration_seconds_, mode_powers_;
    double nrmse_ = -1, rmse_ = -1;
    std::vector<double> slice_nrmse_;  // multislice: each slice's phase NRMSE (compare_truth)
    std::int64_t allreduce_calls_ = 0;
    double allreduce_bytes_ = 0;
    double grad_seconds_total_ = 0;
    double speed_seconds_total_ = 0;  // what rebalance() divides positions by (IterationSteps::speed_seconds)
    double speed_mark_seconds_ = 0;
    std::int64_t speed_mark_positions_ = 0;
    std::int64_t positions_done_ = 0;
    std::int64_t batches_done_ = 0;
    int rebalances_ = 0;
    size_t rebalance_points_ = 0;  // calls of rebalance(), moved or not
    std::int64_t t_object_ = 0, t_probe_ = 0, t_pos_ = 0;  // Adam step counts
    // the initial probe's defocus phase (probe.defocus; auto: choose_defocus) and how it was set
    double defocus_ = 0;
    std::string defocus_source_;  // "trials", "config", "" (the probe came from the file)
    // checkpoints and --resume
    ResumePoint resume_;
    std::string positions_checksum_;  // of the positions as read: with the patterns' shape, the data's identity
    double last_checkpoint_ = 0;      // rank 0's clock at the last write of the output
    int stopped_ = 0;                 // the stop signal the ranks agreed on (0: ran to the end)
    LossWatch loss_watch_;  // the stall warning, once (loss_trend.hpp)
    std::vector<std::string> previews_;
    double comm_trace_[5] = {0, 0, 0, 0, 0};  // EF_RECON_COMM_TRACE: seconds in the gradient sum, the loss-term
                                              // gather, update(), update() and positions, batch assembly
    double deferred_trace_[6] = {0, 0, 0, 0, 0, 0};  // deferred steps, device seconds: gradients, sum, its
                                                     // shortest-rank part, update, idle; host wall
};

}  // namespace ef::recon
