// SPDX-License-Identifier: MIT
#pragma once

#include <complex>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <ensemblefit/recon/recon_tuning.hpp>
#include <ensemblefit/worker/worker_kind.hpp>

namespace ef {

class KernelTally;

/// Sizes and model choices of a reconstruction, fixed for its whole run.
struct ReconWorkerOptions {
    int h = 0, w = 0;          ///< pattern (window) size
    int modes = 1;             ///< probe modes K
    int slices = 1;            ///< object slices S (multislice; 1 = single slice)
    double slice_fresnel = 0;  ///< lambda dz / dx^2 of one slice, in pixels (slices > 1)
    int obj_h = 0, obj_w = 0;  ///< object size
    bool poisson = false;      ///< loss: Poisson, else amplitude (PtyRAD's Gaussian NRMSE)
    bool amplitude_phase = true;
    bool subpixel = true;
    double amplitude_min = 0.0;
    double amplitude_max = std::numeric_limits<double>::infinity();
    bool double_precision = false;  ///< CPU only: the float64 instantiation of the same code
    int threads = 1;                ///< OpenMP threads (CPU)
    int device = 0;                 ///< GPU ordinal (CUDA)
    bool fft_measure = false;       ///< FFTW_MEASURE planning (CPU), else FFTW_ESTIMATE
    ReconTuning tuning;
    /// [run] stream: the GPU worker's patterns in device memory (off), streamed per batch from
    /// page-locked host memory (on), or streamed when they do not fit (automatic). CPU: ignored.
    TuningSwitch stream = TuningSwitch::automatic;
    std::int64_t batch = 0;  ///< positions per mini-batch, all ranks (the GPU's memory estimate)
    // Print-only diagnostics (ef::diagnostics(), read by the host program and handed down):
    bool peer_trace = false;   ///< EF_RECON_PEER_TRACE: the GPU peer sums' barrier and load times
    bool phase_trace = false;  ///< EF_RECON_PHASES: the GPU time per engine phase, when the worker ends
};

/// One rank's part of a mini-batch: rows of its pattern share and the positions (b x 2, y x).
struct ReconBatch {
    std::vector<std::int64_t> pattern_of;
    std::vector<double> positions;
};

/// Loss terms and position gradients of a batch, before the global loss factor.
struct ReconBatchTerms {
    double loss_a = 0;  ///< sums of position_terms, in batch order
    double loss_b = 0;
    std::vector<double> position_terms;  ///< b x 2: each position's loss terms
    std::vector<double> position_grad;   ///< b x 2 (y, x) when asked for
};

/// One Adam update from the summed gradient buffer.
struct ReconUpdate {
    bool object = true;
    bool probe = false;
    double grad_scale = 1.0;
    double lr_p0 = 0, lr_p1 = 0, lr_probe = 0;
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    std::int64_t t_object = 1, t_probe = 1;
};

/// What deferred steps leave for the host (ReconWorker::end_deferred), per batch unless said.
struct ReconDeferredResults {
    std::vector<double> loss;
    std::vector<double> scale;          ///< the loss factor c
    std::vector<double> position_grad;  ///< 2 per position (y, x), batch after batch, when asked for
    // Device time (seconds, from the device's own timeline):
    std::vector<double> gradients;  ///< forward and backward passes
    std::vector<double> sum;        ///< the sum over ranks (0 on one rank)
    std::vector<double> update;     ///< loss factor and Adam
    std::vector<double> gap;        ///< device idle before the batch (0 for the first)
};

/// Patterns streamed to the device batch by batch (GPU workers, run.stream): totals so far.
struct ReconStreamTiming {
    std::int64_t batches = 0;  ///< batches whose patterns were uploaded (0: resident patterns)
    double bytes = 0;          ///< bytes uploaded
    double upload = 0;         ///< device seconds of the uploads (on their copy stream)
    double wait = 0;           ///< seconds the compute stream waited for them: what compute did not hide
};

/**
 * Runs mini-batch steps of a ptychographic reconstruction on one device: the rank's share of
 * the patterns, the object, the probe and the Adam moments live in the device's memory, and a
 * step moves only the gradient buffer to the host (for the MPI sum) and back. The CPU worker
 * (FFTW, OpenMP) and the CUDA worker (cuFFT) run the same PtychoEngine over the same
 * single-source functors (kernels/recon/), so they differ only in memory, launches and FFTs.
 * make_recon_worker() is the only switch on backend.
 *
 * Step protocol: gradients() fills the host gradient buffer (gradient_buffer(): object
 * parameters, then the probe when asked, in double); the caller sums it over ranks in place;
 * update() applies Adam with the loss factor as grad_scale.
 */
class ReconWorker {
   public:
    virtual ~ReconWorker() = default;
    virtual WorkerKind kind() const = 0;
    /// For the placement table: "cpu, 4 threads, FFTW" or "gpu 0: NVIDIA H100".
    virtual std::string describe() const = 0;

    virtual void set_patterns(std::int64_t count, const float* fft_order) = 0;
    /// Where the last set_patterns() put the patterns, when that needs saying (a GPU worker
    /// streaming them, and why; run.stream = on on a CPU worker); empty otherwise.
    virtual std::string pattern_residence() const { return {}; }
    /// The uploads of streamed patterns so far (waits for the device).
    virtual ReconStreamTiming stream_timing() { return {}; }
    virtual void set_object(const std::vector<double>& p0, const std::vector<double>& p1) = 0;
    virtual void object(std::vector<double>& p0, std::vector<double>& p1) = 0;
    virtual std::vector<std::complex<double>> complex_object() = 0;
    virtual void set_probe(const std::vector<std::complex<double>>& probe) = 0;
    virtual std::vector<std::complex<double>> probe() = 0;
    virtual void reset_moments(bool object, bool probe) = 0;
    /// The Adam moments in double (exact for float), for checkpoints: the object's m and v of
    /// both parameters (4 x slices x obj_h x obj_w), then the probe's m and v (2 x 2 K h w).
    virtual std::vector<double> moments() = 0;
    /// Sets them from moments()'s layout (a checkpoint's, of the right size).
    virtual void set_moments(const std::vector<double>& m) = 0;
    /// The probe modes' Gram matrix G(k, l) = <P_k, P_l> (K x K row-major, double).
    virtual std::vector<std::complex<double>> probe_gram() = 0;
    /// Replaces the probe modes by P'_m = sum_l mix(l, m) P_l (mix: K x K row-major): with
    /// probe_gram(), the per-iteration orthogonalisation and intensity constraint without moving
    /// the probe.
    virtual void mix_probe_modes(const std::vector<std::complex<double>>& mix) = 0;

    virtual ReconBatchTerms gradients(const ReconBatch& batch, bool probe_grad, bool position_grad) = 0;
    /// The host gradient buffer (double whatever the working precision): `count` values.
    virtual double* gradient_buffer(bool with_probe, std::size_t& count) = 0;
    /// The probe part of the last gradients() in real space (K x h x w), for tests and tools.
    virtual std::vector<std::complex<double>> probe_gradient() = 0;
    virtual void update(const ReconUpdate& u) = 0;
    /// Single rank: gradients need no sum, so a GPU worker keeps them in device memory
    /// (gradient_buffer() then copies them out only when called).
    virtual void keep_gradients_on_device(bool on) = 0;

    /**
     * Sums over ranks on the devices themselves (GPU workers: NCCL, loaded at run time, so the
     * build needs no NCCL): rank 0 asks device_sum_id() (empty when NCCL is unavailable),
     * broadcasts it, and every rank calls device_sum_init(); after that device_sum() replaces
     * the host-side MPI_Allreduce of the gradient buffer, which then stays on the device.
     * A CPU worker has none of this (empty id, init false).
     */
    virtual std::vector<char> device_sum_id() = 0;
    virtual bool device_sum_init(const std::vector<char>& id, int ranks, int rank, std::string& why) = 0;
    /// Once device_sum_init() has succeeded on every rank, on every rank (collective, all ranks
    /// on one host): sums by direct loads between the GPUs (CUDA IPC) instead of NCCL where
    /// every rank can open the others' memory; every rank uses them or none: false, with why,
    /// when they stay with NCCL.
    virtual bool device_sum_peer(std::string& why) {
        why = "not a GPU worker";
        return false;
    }
    /// Starts the sum over ranks of the gradient buffer, in place (after gradients(), before
    /// update(), which is ordered after it); device_sum_wait() returns when it is done, so the
    /// host can gather the loss terms meanwhile.
    virtual void device_sum(bool with_probe) = 0;
    virtual void device_sum_wait() = 0;

    /**
     * Deferred steps: a whole iteration's batches queued on the device with no wait per batch
     * (the host prepares batch t + 1 while the device runs batch t). Needs gradients kept on the
     * device (one rank, or device_sum()). Per batch: gradients_deferred() (this rank's positions
     * are [offset, offset + b) of `total` in global batch order), device_sum() on several ranks
     * (it then also sums the loss terms), and update_deferred(), which computes the loss factor
     * on the device from the summed terms (same sums, same order, same bits as the per-batch
     * protocol) and applies Adam with it. end_deferred() waits and returns the losses, the loss
     * factors and the position gradients, whose Adam steps the caller then takes: a position
     * is in one batch per iteration, so nothing needs them sooner.
     */
    virtual bool deferred_supported() const = 0;
    /// `max_positions`: of a batch, all ranks; `own_positions`: this rank's, all batches.
    virtual void begin_deferred(std::int64_t batches, std::int64_t max_positions, std::int64_t own_positions) = 0;
    virtual void gradients_deferred(const ReconBatch& batch, bool probe_grad, bool position_grad, std::int64_t offset,
                                    std::int64_t total) = 0;
    /// `u.grad_scale` is ignored: the factor comes from the summed loss terms and `pixels`.
    virtual void update_deferred(const ReconUpdate& u, double pixels, std::int64_t batch) = 0;
    virtual ReconDeferredResults end_deferred(std::int64_t batches) = 0;

    /// Noiseless model intensities of a batch (b x n, FFT order), for the simulator.
    virtual std::vector<double> model_intensity(const ReconBatch& batch) = 0;
    /// Bytes the step moves through device memory per batch position (traffic model).
    virtual double traffic_bytes(bool probe_grad, bool position_grad) const = 0;
    /// The time and counts of the engine's phases so far (the marks of kernels/recon/
    /// ptycho_engine.hpp: host clock on a CPU worker, CUDA events on a GPU worker) and a GPU's
    /// device intervals (kernels/core/kernel_tally.hpp); null: none kept.
    virtual const KernelTally* kernel_tally() const { return nullptr; }
};

std::unique_ptr<ReconWorker> make_recon_worker(WorkerKind kind, const ReconWorkerOptions& options);

}  // namespace ef
