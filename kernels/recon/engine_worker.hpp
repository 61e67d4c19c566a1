// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include <ensemblefit/recon/recon_worker.hpp>

#include "kernels/recon/ptycho_engine.hpp"

namespace ef::recon {

inline EngineOptions engine_options(const ReconWorkerOptions& o) {
    EngineOptions e;
    e.loss = o.poisson ? LossKind::poisson : LossKind::amplitude;
    e.amplitude_phase = o.amplitude_phase;
    e.subpixel = o.subpixel;
    e.amplitude_min = o.amplitude_min;
    e.amplitude_max = o.amplitude_max;
    e.window_groups = o.tuning.window_groups;
    e.slices = o.slices;
    e.slice_fresnel = o.slice_fresnel;
    return e;
}

inline PtychoDims engine_dims(const ReconWorkerOptions& o) {
    PtychoDims d;
    d.h = o.h;
    d.w = o.w;
    d.modes = o.modes;
    d.obj_h = o.obj_h;
    d.obj_w = o.obj_w;
    return d;
}

/**
 * A ReconWorker over PtychoEngine<T, Backend>: the one adapter both backends use, so the
 * CPU and CUDA workers differ only in the Backend they construct.
 */
template <class T, class Backend>
class EngineWorker final : public ReconWorker {
   public:
    EngineWorker(WorkerKind kind, std::string description, std::unique_ptr<Backend> be, const ReconWorkerOptions& o)
        : kind_(kind), description_(std::move(description)), be_(std::move(be)),
          engine_(*be_, engine_dims(o), engine_options(o)), stream_(o.stream) {
        engine_.set_batch_hint(o.batch);
    }

    WorkerKind kind() const override { return kind_; }
    std::string describe() const override { return description_; }
    void set_patterns(std::int64_t count, const float* data) override { engine_.set_patterns(count, data); }
    std::string pattern_residence() const override {
        if constexpr (requires { be_->stream_note(); })
            return be_->stream_note();
        else if (stream_ == TuningSwitch::on)
            return "run.stream = on: ignored by CPU workers (streaming is a GPU feature; their patterns are in "
                   "host memory already)";
        return {};
    }
    ReconStreamTiming stream_timing() override {
        if constexpr (requires { be_->stream_timing(); })
            return be_->stream_timing();
        else
            return {};
    }
    void set_object(const std::vector<double>& p0, const std::vector<double>& p1) override {
        engine_.set_object(p0, p1);
    }
    void object(std::vector<double>& p0, std::vector<double>& p1) override { engine_.object(p0, p1); }
    std::vector<std::complex<double>> complex_object() override { return engine_.complex_object(); }
    void set_probe(const std::vector<std::complex<double>>& p) override { engine_.set_probe(p); }
    std::vector<std::complex<double>> probe() override { return engine_.probe(); }
    void reset_moments(bool object, bool probe) override { engine_.reset_moments(object, probe); }
    std::vector<double> moments() override { return engine_.moments(); }
    void set_moments(const std::vector<double>& m) override { engine_.set_moments(m); }
    std::vector<std::complex<double>> probe_gram() override { return engine_.probe_gram(); }
    void mix_probe_modes(const std::vector<std::complex<double>>& mix) override { engine_.mix_probe_modes(mix); }

    ReconBatchTerms gradients(const ReconBatch& batch, bool probe_grad, bool position_grad) override {
        BatchSpec b{batch.pattern_of, batch.positions};
        BatchTerms t = engine_.gradients(b, probe_grad, position_grad);
        be_->mark("");  // the last phase ends here, not at the next mark after the sum over ranks
        return ReconBatchTerms{t.loss_a, t.loss_b, std::move(t.position_terms), std::move(t.position_grad)};
    }
    double* gradient_buffer(bool with_probe, std::size_t& count) override {
        count = engine_.gradient_size(with_probe);
        return engine_.host_gradients();
    }
    std::vector<std::complex<double>> probe_gradient() override { return engine_.probe_gradient(); }
    void update(const ReconUpdate& u) override {
        engine_.update(u);
        be_->mark("");
    }
    void keep_gradients_on_device(bool on) override { engine_.set_device_only(on); }
    std::vector<char> device_sum_id() override { return be_->device_sum_id(); }
    bool device_sum_init(const std::vector<char>& id, int ranks, int rank, std::string& why) override {
        return be_->device_sum_init(id, ranks, rank, why);
    }
    bool device_sum_peer(std::string& why) override {
        return be_->peer_sum_init(engine_.device_gradients(), static_cast<std::int64_t>(engine_.gradient_size(true)), why);
    }
    void device_sum(bool with_probe) override {
        std::size_t terms = 0;
        double* t = engine_.deferred() ? engine_.device_terms(terms) : nullptr;
        be_->device_sum(engine_.device_gradients(), engine_.gradient_size(with_probe), t, terms, engine_.sum_split());
    }
    void device_sum_wait() override { be_->synchronize(); }

    // Deferred steps: four device time stamps per batch (gradients start and end, update start
    // and end); the sum over ranks lies between the second and the third.
    bool deferred_supported() const override { return be_->defer_steps(); }
    void begin_deferred(std::int64_t batches, std::int64_t max_positions, std::int64_t own_positions) override {
        engine_.begin_deferred(batches, max_positions, own_positions);
        stamps_ = 0;
    }
    void gradients_deferred(const ReconBatch& batch, bool probe_grad, bool position_grad, std::int64_t offset,
                            std::int64_t total) override {
        be_->stamp(stamps_++);
        engine_.gradients_deferred(BatchSpec{batch.pattern_of, batch.positions}, probe_grad, position_grad, offset, total);
        be_->mark("");
        be_->stamp(stamps_++);
    }
    void update_deferred(const ReconUpdate& u, double pixels, std::int64_t batch) override {
        be_->stamp(stamps_++);
        engine_.update_deferred(u, pixels, batch);
        be_->mark("");
        be_->stamp(stamps_++);
    }
    ReconDeferredResults end_deferred(std::int64_t batches) override {
        ReconDeferredResults r;
        engine_.end_deferred(batches, r.loss, r.scale, r.position_grad);
        for (std::size_t t = 0; t < stamps_ / 4; ++t) {
            const std::size_t s = 4 * t;
            r.gradients.push_back(be_->stamp_seconds(s, s + 1));
            r.sum.push_back(be_->stamp_seconds(s + 1, s + 2));
            r.update.push_back(be_->stamp_seconds(s + 2, s + 3));
            r.gap.push_back(t ? be_->stamp_seconds(s - 1, s) : 0.0);
        }
        return r;
    }

    std::vector<double> model_intensity(const ReconBatch& batch) override {
        return engine_.model_intensity(BatchSpec{batch.pattern_of, batch.positions});
    }
    double traffic_bytes(bool probe_grad, bool position_grad) const override {
        return engine_.traffic_bytes(probe_grad, position_grad);
    }
    const KernelTally* kernel_tally() const override { return &be_->tally(); }

   private:
    WorkerKind kind_;
    std::string description_;
    std::unique_ptr<Backend> be_;
    PtychoEngine<T, Backend> engine_;
    TuningSwitch stream_;     // run.stream
    std::size_t stamps_ = 0;  // deferred steps: time stamps taken
};

}  // namespace ef::recon
