// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <complex>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

#include <ensemblefit/recon/recon_worker.hpp>

#include "kernels/recon/multislice_math.hpp"
#include "kernels/recon/ptycho_math.hpp"
#include "kernels/recon/window_passes.hpp"

namespace ef::recon {

/// What the engine needs to know besides the sizes.
struct EngineOptions {
    LossKind loss = LossKind::amplitude;
    bool amplitude_phase = true;  ///< object parameters: amplitude and phase, else real and imaginary
    bool subpixel = true;         ///< shift the probe by each position's sub-pixel remainder
    double amplitude_min = 0.0;   ///< clamp of the object amplitude after each update
    double amplitude_max = std::numeric_limits<double>::infinity();
    int window_groups = 0;        ///< mode groups of the window passes (0: chosen per batch)
    int slices = 1;               ///< object slices S (multislice_math.hpp); 1 = the single-slice model
    double slice_fresnel = 0;     ///< lambda dz / dx^2 of one slice, pixels (slices > 1)
};

/// One rank's part of a mini-batch, host side.
struct BatchSpec {
    std::vector<std::int64_t> pattern_of;  ///< b: row of the rank's pattern share
    std::vector<double> positions;         ///< b x 2: (y, x) of the window's top-left, object pixels
};

/// What a batch returns besides the gradient buffer: loss terms and position gradients, both
/// before the global loss factor c.
struct BatchTerms {
    double loss_a = 0;  ///< sums of position_terms in batch order
    double loss_b = 0;
    std::vector<double> position_terms;  ///< b x 2: each position's loss terms (a, b)
    std::vector<double> position_grad;   ///< b x 2 (y, x), empty unless asked for
};

/// One Adam update of the model from the (summed) gradient buffer: the worker interface's
/// (grad_scale is the loss factor c; t_object and t_probe count Adam steps from 1).
using UpdateSpec = ReconUpdate;

/// Crop (nearest integer) and sub-pixel remainder of a window position, clamped to the object.
inline void split_position(double pos, int window, int extent, int& crop, double& shift) {
    const double hi = static_cast<double>(extent - window);
    double c = std::nearbyint(pos);
    c = std::min(std::max(c, 0.0), hi);
    crop = static_cast<int>(c);
    shift = pos - c;
}

/**
 * One mini-batch step of single-slice mixed-state ptychography, sequenced once for every
 * backend. Backend (CpuBackend<T>, CudaBackend<T>) supplies memory (Buffer<U>, upload,
 * download), for_each(n, f), reduce_groups(groups, size, f, host_out) and batched in-place
 * FFTs; the math is the functors of ptycho_math.hpp. State (patterns of the rank's share,
 * object parameters and complex object, probe, Adam moments) lives in the backend's memory, so
 * a GPU rank moves only the gradient buffer (and small per-batch index arrays) per step.
 *
 * Per batch of b positions and K modes, with T = one b x K x n complex tensor pass, the
 * sub-pixel path streams about 13 T through element-wise functors plus 4 batched FFTs
 * (shifted probes, far field, back-propagation, probe-gradient spectra); without sub-pixel
 * shifts about 9 T and 2 FFTs (see traffic_bytes()).
 *
 * The gradient buffer holds [dL/dp0 (obj_n) | dL/dp1 (obj_n) | dL/dprobe (K x n complex, or
 * its spectrum with sub-pixel shifts, without its 1 / n)] in double, without the loss factor c
 * (with amplitude-phase parameters the object's part is the complex object's gradient, Re and
 * Im: update() applies the chain rule); the caller sums it over ranks in place (host memory) and
 * then calls update() with c. Nothing is scaled or converted per rank before that sum (issue 35).
 * Sums over the batch are taken in batch order in double, so a sum split over ranks differs from
 * the one-rank sum by double rounding only and, once rounded to T for the update, almost never
 * at all (docs/reconstruction.md).
 */
template <class T, class Backend>
class PtychoEngine {
   public:
    using C = Cx<T>;
    template <class U>
    using Buffer = typename Backend::template Buffer<U>;

    PtychoEngine(Backend& be, const PtychoDims& d, const EngineOptions& o) : be_(be), d_(d), o_(o) {
        if (o_.slices < 1) o_.slices = 1;
        const size_t on = static_cast<size_t>(object_n());
        const size_t kn = static_cast<size_t>(d.modes * d.n());
        p0_.resize(on);
        p1_.resize(on);
        m0_.resize(on);
        v0_.resize(on);
        m1_.resize(on);
        v1_.resize(on);
        object_.resize(on);
        probe_.resize(kn);
        probe_spec_.resize(kn);
        probe_tmp_.resize(kn);
        mp_.resize(2 * kn);
        vp_.resize(2 * kn);
        grad_.resize(2 * on + 2 * kn);  // double: see ProbeGradientDirect
        if constexpr (!Backend::kHostMemory) host_grad_.resize(2 * on + 2 * kn);
        // Multislice runs the transform-per-pass sequence (the window passes hold one slice's wave).
        window_n_ = o_.slices == 1 ? be_.window_size(d) : 0;
        if (o_.slices > 1) {
            const std::vector<C> prop = fresnel_propagator<T>(d.h, d.w, o_.slice_fresnel);
            propagator_.resize(prop.size());
            be_.upload(propagator_.data(), prop.data(), prop.size());
        }
        if (window_n_) {
            std::vector<C> tw(static_cast<size_t>(window_n_));
            wfft::make_twiddles(window_n_, tw.data());
            twiddle_.resize(tw.size());
            be_.upload(twiddle_.data(), tw.data(), tw.size());
        }
    }

    const PtychoDims& dims() const { return d_; }
    /// Object pixels over all slices: the length of each object parameter (S x obj_h x obj_w).
    std::int64_t object_n() const { return static_cast<std::int64_t>(o_.slices) * d_.obj_n(); }
    const EngineOptions& options() const { return o_; }
    Backend& backend() { return be_; }

    /// The rank's share of patterns, count x n, FFT order (kept in slot order for the
    /// window-resident passes): in the backend's memory, or, where the backend streams them
    /// (the GPU's run.stream), in its page-locked host memory, copied batch by batch.
    void set_patterns(std::int64_t count, const float* host) {
        const size_t total = static_cast<size_t>(count * d_.n());
        float* dst = nullptr;
        std::vector<float> slots;
        streamed_ = false;
        if constexpr (kStreams) {
            const std::int64_t b = std::min<std::int64_t>(std::max<std::int64_t>(batch_hint_, 1), count);
            streamed_ = be_.stream_patterns(total * sizeof(float), batch_bytes(b), patterns_.size() * sizeof(float));
            if (streamed_) {
                patterns_.resize(0);
                dst = be_.stream_host(total);
                if (!window_n_ && total) std::memcpy(dst, host, total * sizeof(float));
            }
        }
        if (!streamed_) patterns_.resize(total);
        if (window_n_) {
            if (!dst) {
                slots.resize(total);
                dst = slots.data();
            }
            const std::int64_t n = d_.n();
            std::vector<int> freq(static_cast<size_t>(n));  // the slot order once, then a gather per pattern
            for (int s = 0; s < static_cast<int>(n); ++s) freq[static_cast<size_t>(s)] = window_freq_of_slot(s);
            for (std::int64_t i = 0; i < count; ++i) {
                const float* src = host + i * n;
                float* out = dst + i * n;
                for (std::int64_t s = 0; s < n; ++s) out[s] = src[freq[static_cast<size_t>(s)]];
            }
            if (!streamed_) be_.upload(patterns_.data(), slots.data(), total);
        } else if (!streamed_) {
            be_.upload(patterns_.data(), host, total);
        }
        pattern_count_ = count;
    }
    /// Positions per mini-batch over all ranks (an upper bound of this rank's), for the memory
    /// estimate of set_patterns().
    void set_batch_hint(std::int64_t b) { batch_hint_ = b; }
    /// Whether the last set_patterns() left the patterns in host memory, streamed per batch.
    bool streamed() const { return streamed_; }
    /**
     * Device bytes of a batch of b positions beyond the model: the work space of
     * ensure_workspace(), the window passes' mode-group parts (at most K groups), the ramps and
     * about one more b K n tensor for cuFFT's work area. An estimate, for set_patterns().
     */
    std::size_t batch_bytes(std::int64_t b) const {
        const auto kn = static_cast<std::size_t>(be_.fft_rows(b * d_.modes) * d_.n()), bn = static_cast<std::size_t>(b * d_.n());
        const auto S = static_cast<std::size_t>(o_.slices);
        std::size_t complex = kn * (2 + (o_.subpixel ? 1 : 0) + (S - 1)) + S * bn +
                              static_cast<std::size_t>(b * (d_.h + d_.w));
        std::size_t real = bn;
        if (window_n_ && d_.modes > 1) {
            complex += kn;
            real += kn;
        }
        return complex * sizeof(C) + real * sizeof(T);
    }

    /// The window size of the window-resident passes (0: the transform-per-pass sequence).
    int window_size() const { return window_n_; }
    std::int64_t pattern_count() const { return pattern_count_; }

    /// Object parameters (amplitude and phase, or real and imaginary part), slices x obj_h x obj_w each (slice after slice).
    void set_object(const std::vector<double>& p0, const std::vector<double>& p1) {
        upload_real(p0, p0_);
        upload_real(p1, p1_);
        refresh_object();
    }
    void object(std::vector<double>& p0, std::vector<double>& p1) {
        download_real(p0_, p0);
        download_real(p1_, p1);
    }
    void set_probe(const std::vector<std::complex<double>>& probe) {
        std::vector<C> tmp(probe.size());
        for (size_t i = 0; i < probe.size(); ++i)
            tmp[i] = {static_cast<T>(probe[i].real()), static_cast<T>(probe[i].imag())};
        be_.upload(probe_.data(), tmp.data(), tmp.size());
        probe_spec_valid_ = probe_spec_has_probe_ = false;
    }
    std::vector<std::complex<double>> probe() {
        std::vector<C> tmp(probe_.size());
        be_.download(tmp.data(), probe_.data(), tmp.size());
        std::vector<std::complex<double>> out(tmp.size());
        for (size_t i = 0; i < tmp.size(); ++i) out[i] = {double(tmp[i].re), double(tmp[i].im)};
        return out;
    }
    /// The Adam moments in double (exact for T = float): the object's m0, v0, m1, v1 (obj_n
    /// each), then the probe's m, v (2 K n each); what a checkpoint needs beside the parameters.
    std::vector<double> moments() {
        std::vector<double> out, part;
        for (Buffer<T>* b : {&m0_, &v0_, &m1_, &v1_, &mp_, &vp_}) {
            download_real(*b, part);
            out.insert(out.end(), part.begin(), part.end());
        }
        return out;
    }
    /// Sets the moments from moments()'s layout (a checkpoint's; the size was checked by the caller).
    void set_moments(const std::vector<double>& m) {
        auto at = m.begin();
        for (Buffer<T>* b : {&m0_, &v0_, &m1_, &v1_, &mp_, &vp_}) {
            const auto end = at + static_cast<std::ptrdiff_t>(b->size());
            upload_real(std::vector<double>(at, end), *b);
            at = end;
        }
    }
    /// Zeroes the Adam moments of the object and/or the probe.
    void reset_moments(bool object, bool probe) {
        if (object)
            for (auto* b : {&m0_, &v0_, &m1_, &v1_}) zero(*b);
        if (probe) {
            zero(mp_);
            zero(vp_);
        }
    }

    /**
     * Forward and backward pass over the batch: fills the gradient buffer (probe part only when
     * `probe_grad`) and returns the loss terms and, when `position_grad`, the position gradients.
     */
    BatchTerms gradients(const BatchSpec& batch, bool probe_grad, bool position_grad) {
        const std::int64_t b = static_cast<std::int64_t>(batch.pattern_of.size());
        const std::int64_t n = d_.n();
        const std::int64_t K = d_.modes;
        BatchTerms out;
        if (position_grad) out.position_grad.assign(static_cast<size_t>(2 * b), 0.0);
        side_gather_ = false;
        std::int64_t on = object_n();
        if (b == 0) {
            be_.for_each(probe_grad ? 2 * on + 2 * K * n : 2 * on, FillValue<double>{grad_.data(), 0.0});
            finish_gradients(probe_grad);
            return out;
        }
        // Deferred steps: the per-position loss terms (and position gradients) go to device
        // arrays, not to the host.
        Sum2* const sink = sink_;
        Sum2* const pos_sink = position_grad ? pos_sink_ : nullptr;
        if (window_n_ == 128) return window_gradients<128>(batch, probe_grad, position_grad);
        if (window_n_ == 64) return window_gradients<64>(batch, probe_grad, position_grad);
        if (window_n_ == 32) return window_gradients<32>(batch, probe_grad, position_grad);
        const bool shifted = o_.subpixel;
        forward_far_field(batch);
        const bool gp_fft = shifted && (probe_grad || position_grad);

        // Per-position sums come back (on the GPU) at the next synchronize(): read after it.
        std::vector<Sum2> per(sink ? 0 : static_cast<size_t>(b));
        std::vector<Sum2> pg(position_grad && gp_fft && !pos_sink ? static_cast<size_t>(b) : 0);
        Sum2* const pg_out = pos_sink ? pos_sink : pg.data();
        be_.mark("modulus");
        const float* patterns = batch_patterns();
        be_.reduce_groups(b, n,
                          ModulusGradient<T>{d_, o_.loss, patterns, pattern_of_.data(), psi_.data()},
                          sink ? sink : per.data(), sink != nullptr);
        be_.mark("ifft far field");
        be_.fft_batch(psi_.data(), b * K, true);
        if (o_.slices > 1) back_propagate_slices(b);
        be_.mark("patch gradients");
        be_.for_each_rows(b, static_cast<int>(n),
                          PatchGradients<T>{d_, shifted ? pshift_.data() : probe_.data(), shifted, object_.data(),
                                            crop_.data(), psi_.data(), patch_grad_.data()});
        Cx<double>* grad_probe = reinterpret_cast<Cx<double>*>(grad_.data() + 2 * on);
        if (gp_fft) {
            be_.mark("fft probe gradient");
            be_.fft_batch(psi_.data(), b * K, false);
            // The spectrum is what ranks sum; update() takes it back to real space.
            be_.mark("probe spectrum, positions");
            const ProbeGradientSpectrum<T> spec{d_, b, ramp_.data(), psi_.data(), grad_probe};
            const PositionGradientTerm<T> pos{d_, ramp_.data(), probe_spec_.data(), psi_.data()};
            // One pass for both where the backend has it (the GPU), else two.
            const bool one_pass =
                position_grad && be_.spectrum_and_positions(b, spec, probe_grad, pos, pg_out, pos_sink != nullptr);
            merged_used_ = one_pass && probe_grad;
            if (!one_pass) {
                if (probe_grad) be_.for_each(K * n, spec);
                if (position_grad) be_.reduce_groups(b, K * n, pos, pg_out, pos_sink != nullptr);
            }
        } else if (probe_grad) {
            be_.mark("probe gradient");
            be_.for_each(K * n, ProbeGradientDirect<T>{d_, b, psi_.data(), grad_probe});
        }
        object_gradient_and_finish(probe_grad);
        if (!sink) collect_terms(per, pg, out);
        return out;
    }

    // ---- deferred steps ----------------------------------------------------------------------
    /**
     * Deferred steps keep an iteration's batches on the device, with no wait per batch:
     * gradients_deferred() leaves the batch's per-position loss terms in a device array laid out
     * in global batch order (zeros where other ranks' positions go, so summing the arrays over
     * ranks is exact in any order), the caller sums the gradient buffer and that array over ranks
     * on the devices (device_terms()), and update_deferred() computes the loss factor from it on
     * the device (LossScale: the host's sum order, the same bits) and applies Adam with it.
     * end_deferred() waits and returns each batch's loss and factor and the position gradients
     * (whose Adam steps the caller takes). Needs set_device_only(true).
     */
    /// For `batches` batches of at most `max_positions` positions (all ranks), `own_positions`
    /// of them this rank's (the room for position gradients).
    void begin_deferred(std::int64_t batches, std::int64_t max_positions, std::int64_t own_positions) {
        if (losses_.size() < static_cast<size_t>(batches)) losses_.resize(static_cast<size_t>(batches));
        if (scale_.size() < static_cast<size_t>(batches)) scale_.resize(static_cast<size_t>(batches));
        if (terms_.size() < static_cast<size_t>(max_positions)) terms_.resize(static_cast<size_t>(max_positions));
        if (pos_grads_.size() < static_cast<size_t>(own_positions)) pos_grads_.resize(static_cast<size_t>(own_positions));
        // Zero where other ranks' positions go; LossScale zeroes what it reads, batch after batch.
        be_.for_each(static_cast<std::int64_t>(terms_.size()), FillValue<Sum2>{terms_.data(), Sum2{}});
        pos_used_ = 0;
        deferred_ = true;
    }
    bool deferred() const { return deferred_; }
    /**
     * gradients() of this rank's positions [offset, offset + b) of a batch of `total` positions;
     * with `position_grad`, their gradients follow the previous batches' in a device array
     * (end_deferred() returns them: a position is in one batch per iteration, so its Adam step
     * can wait for the iteration's end).
     */
    void gradients_deferred(const BatchSpec& batch, bool probe_grad, bool position_grad, std::int64_t offset,
                            std::int64_t total) {
        const std::int64_t b = static_cast<std::int64_t>(batch.pattern_of.size());
        if (position_grad && pos_used_ + b > static_cast<std::int64_t>(pos_grads_.size()))
            throw std::logic_error("deferred steps: more positions than begin_deferred() made room for");
        terms_count_ = total;
        sink_ = terms_.data() + offset;
        pos_sink_ = position_grad ? pos_grads_.data() + pos_used_ : nullptr;
        // Position gradients come with sub-pixel shifts only (for every position): else zeros.
        if (position_grad && !o_.subpixel) be_.for_each(b, FillValue<Sum2>{pos_sink_, Sum2{}});
        gradients(batch, probe_grad, position_grad);
        if (!side_gather_) {  // the object's part made on the main stream: the side waits for it
            be_.side_begin();
            be_.side_end();
        }
        sink_ = pos_sink_ = nullptr;
        if (position_grad) pos_used_ += b;
    }
    /// Doubles at the start of the gradient buffer (the object's part) that gradients_deferred()
    /// leaves ready on the side stream, where the sum over ranks may sum them (0: all of it on
    /// the main stream). The same on every rank: it depends on deferred steps only.
    std::size_t sum_split() const { return deferred_ ? static_cast<size_t>(2 * object_n()) : 0; }
    /// The batch's loss-term array (2 doubles per position), for the sum over ranks.
    double* device_terms(std::size_t& count) {
        count = static_cast<size_t>(2 * terms_count_);
        return reinterpret_cast<double*>(terms_.data());
    }
    /// The loss and its factor of batch `index` (of `pixels` pattern pixels) on the device, then update().
    void update_deferred(const UpdateSpec& u, double pixels, std::int64_t index) {
        double* scale = scale_.data() + index;
        be_.mark("loss factor");
        const LossScale ls{o_.loss, terms_.data(), terms_count_, pixels, losses_.data() + index, scale, terms_.data()};
        update(u, scale, &ls);
    }
    /// Waits for the device: each deferred batch's loss and loss factor, and the position
    /// gradients (2 per position, y then x, batch after batch).
    void end_deferred(std::int64_t batches, std::vector<double>& loss, std::vector<double>& scale,
                      std::vector<double>& position_grad) {
        loss.resize(static_cast<size_t>(batches));
        scale.resize(static_cast<size_t>(batches));
        be_.download(loss.data(), losses_.data(), loss.size());
        be_.download(scale.data(), scale_.data(), scale.size());
        std::vector<Sum2> pg(static_cast<size_t>(pos_used_));
        be_.download(pg.data(), pos_grads_.data(), pg.size());
        position_grad.resize(2 * pg.size());
        for (size_t j = 0; j < pg.size(); ++j) {
            position_grad[2 * j] = pg[j].a;
            position_grad[2 * j + 1] = pg[j].b;
        }
        deferred_ = false;
    }

    /**
     * With `on`, gradients stay in device memory and update() uses them there: for a single
     * rank, which sums nothing and need not move the buffer to the host and back.
     */
    void set_device_only(bool on) { device_only_ = on; }

    /**
     * The gradient buffer in host memory (summed over ranks in place by the caller): object
     * parameter gradients, then the probe's (its spectrum with sub-pixel shifts, see
     * ProbeGradientSpectrum; probe_gradient() gives it in real space).
     */
    double* host_gradients() {
        if constexpr (Backend::kHostMemory) {
            return grad_.data();
        } else {
            if (device_only_) be_.download(host_grad_.data(), grad_.data(), grad_.size());
            return host_grad_.data();
        }
    }
    /// The gradient buffer (host_gradients()) with the object's part as the gradients of its
    /// parameters (with amplitude-phase parameters the buffer holds the complex object's
    /// gradient until update() converts it: ObjectChainRule), for inspection and tests.
    std::vector<double> parameter_gradients(bool with_probe) {
        const double* g = host_gradients();
        std::vector<double> out(g, g + gradient_size(with_probe));
        if (!o_.amplitude_phase) return out;
        std::vector<double> a, phi;
        object(a, phi);
        const size_t on = static_cast<size_t>(object_n());
        for (size_t i = 0; i < on; ++i)
            ObjectChainRule<T>::apply(static_cast<T>(a[i]), static_cast<T>(phi[i]), out[i], out[on + i], out[i], out[on + i]);
        return out;
    }
    /// The gradient buffer in the backend's memory (for a device-side sum over ranks).
    double* device_gradients() { return grad_.data(); }
    std::size_t gradient_size(bool with_probe) const {
        return static_cast<size_t>(2 * object_n() + (with_probe ? 2 * d_.modes * d_.n() : 0));
    }

    /// ProbeGradientSpectrum's 1 / n, applied after the sum over ranks (SpectrumToWorking).
    T spectrum_scale() const { return static_cast<T>(1.0 / static_cast<double>(d_.n())); }

    /// The probe gradient of the last gradients() call in real space (K x n), for inspection.
    std::vector<std::complex<double>> probe_gradient() {
        const std::int64_t kn = d_.modes * d_.n();
        const Cx<double>* g = reinterpret_cast<const Cx<double>*>(grad_.data() + 2 * object_n());
        std::vector<C> tmp(static_cast<size_t>(kn));
        if (o_.subpixel) {
            be_.for_each(kn, SpectrumToWorking<T>{g, probe_tmp_.data(), spectrum_scale()});
            be_.fft(probe_tmp_.data(), d_.modes, true);
            be_.download(tmp.data(), probe_tmp_.data(), tmp.size());
            std::vector<std::complex<double>> out(tmp.size());
            for (size_t i = 0; i < tmp.size(); ++i) out[i] = {double(tmp[i].re), double(tmp[i].im)};
            return out;
        }
        std::vector<Cx<double>> raw(static_cast<size_t>(kn));
        be_.download(raw.data(), g, raw.size());
        std::vector<std::complex<double>> out(raw.size());
        for (size_t i = 0; i < raw.size(); ++i) out[i] = {raw[i].re, raw[i].im};
        return out;
    }

    /// Adam on the object and/or probe from the host gradient buffer; `scale`: the loss factor
    /// in device memory instead of u.grad_scale (deferred steps), made first by `loss_scale`
    /// when given.
    void update(const UpdateSpec& u, const double* scale = nullptr, const LossScale* loss_scale = nullptr) {
        const std::int64_t on = object_n();
        const std::int64_t kn2 = 2 * d_.modes * d_.n();
        if constexpr (!Backend::kHostMemory)
            if (!device_only_) be_.upload(grad_.data(), host_grad_.data(), gradient_size(u.probe));
        const T inf = std::numeric_limits<T>::infinity();
        // The summed probe spectrum back to real space, once, on every rank alike (sub-pixel shifts)
        const SpectrumToWorking<T> to_working{reinterpret_cast<const Cx<double>*>(grad_.data() + 2 * on), probe_tmp_.data(),
                                              spectrum_scale()};
        const bool spectrum = u.probe && o_.subpixel;
        if (loss_scale) {  // in the same launch as the spectrum's copy (a launch less on the probe's chain)
            if (spectrum)
                be_.for_each(LossScale::kLanes + kn2 / 2,
                             BothPasses<LossScale, SpectrumToWorking<T>>{*loss_scale, LossScale::kLanes, to_working});
            else
                be_.for_each(LossScale::kLanes, *loss_scale);
        }
        if (u.object) {
            be_.mark("object step");
            be_.side_begin();  // beside the probe's step (FFTs of few windows, latency-bound)
            const T lo = o_.amplitude_phase ? static_cast<T>(o_.amplitude_min) : -inf;
            const T hi = o_.amplitude_phase ? static_cast<T>(o_.amplitude_max) : inf;
            // Counted for the roofline (estimates): per element, two Adam updates (p, m, v read
            // and written, the double gradient read; about 12 FLOP each) and the complex object
            // written (about 20 FLOP for its sine and cosine).
            be_.count(44.0 * static_cast<double>(on),
                      (2.0 * (6.0 * sizeof(T) + sizeof(double)) + sizeof(C)) * static_cast<double>(on));
            be_.for_each(on, ObjectStep<T>{
                                 AdamUpdate<T, double>{p0_.data(), m0_.data(), v0_.data(), grad_.data(),
                                                       coefficients(u, u.lr_p0, u.t_object), lo, hi, scale},
                                 AdamUpdate<T, double>{p1_.data(), m1_.data(), v1_.data(), grad_.data() + on,
                                                       coefficients(u, u.lr_p1, u.t_object), -inf, inf, scale},
                                 ObjectFromParams<T>{o_.amplitude_phase, p0_.data(), p1_.data(), object_.data()},
                                 o_.amplitude_phase});
            be_.side_end();
        }
        if (u.probe) {
            be_.mark("probe step");
            T* probe = reinterpret_cast<T*>(probe_.data());
            const AdamCoefficients<T> a = coefficients(u, u.lr_probe, u.t_probe);
            be_.count(12.0 * static_cast<double>(kn2), (6.0 * sizeof(T) + sizeof(double)) * static_cast<double>(kn2));
            if (o_.subpixel) {
                if (!loss_scale) be_.for_each(kn2 / 2, to_working);
                be_.fft(probe_tmp_.data(), d_.modes, true);
                // The new probe also into probe_spec_, where the next spectrum is taken in place.
                be_.for_each(kn2, AdamUpdate<T, T>{probe, mp_.data(), vp_.data(), reinterpret_cast<const T*>(probe_tmp_.data()),
                                                   a, -inf, inf, scale, reinterpret_cast<T*>(probe_spec_.data())});
                probe_spec_has_probe_ = true;
            } else {
                be_.for_each(kn2, AdamUpdate<T, double>{probe, mp_.data(), vp_.data(), grad_.data() + 2 * on, a, -inf, inf,
                                                        scale});
            }
            probe_spec_valid_ = false;
            // Deferred steps: the next batch's spectrum now, while the object's chain (its part
            // of the sum, its step) runs on the side stream.
            if (deferred_ && o_.subpixel && window_n_) ensure_spectrum_slots();
        }
        if (u.object || deferred_) be_.side_join();
    }

    /**
     * The Gram matrix of the probe modes, G(k, l) = sum_q conj(P_k(q)) P_l(q) (K x K row-major,
     * double; a deterministic reduction per pair). With mix_probe_modes() the per-iteration mode
     * orthogonalisation and intensity constraint run where the probe lives: only K x K numbers
     * cross to the host and back.
     */
    std::vector<std::complex<double>> probe_gram() {
        const std::int64_t K = d_.modes, pairs = K * (K + 1) / 2;
        std::vector<Sum2> g(static_cast<size_t>(pairs));
        be_.reduce_groups(pairs, d_.n(), ProbeGram<T>{probe_.data(), d_.n(), d_.modes}, g.data());
        be_.synchronize();
        std::vector<std::complex<double>> gram(static_cast<size_t>(K * K));
        for (std::int64_t k = 0, i = 0; k < K; ++k)
            for (std::int64_t l = k; l < K; ++l, ++i) {
                gram[static_cast<size_t>(k * K + l)] = {g[static_cast<size_t>(i)].a, g[static_cast<size_t>(i)].b};
                gram[static_cast<size_t>(l * K + k)] = {g[static_cast<size_t>(i)].a, -g[static_cast<size_t>(i)].b};
            }
        return gram;
    }
    /// P'_m = sum_l mix(l, m) P_l (mix: K x K row-major).
    void mix_probe_modes(const std::vector<std::complex<double>>& mix) {
        const std::int64_t kn = d_.modes * d_.n();
        std::vector<Cx<double>> m(mix.size());
        for (size_t i = 0; i < mix.size(); ++i) m[i] = {mix[i].real(), mix[i].imag()};
        if (mix_.size() < m.size()) mix_.resize(m.size());
        be_.upload_staged(mix_.data(), m.data(), m.size() * sizeof(Cx<double>));
        be_.for_each(kn, CopyValue<C>{probe_.data(), probe_tmp_.data()});
        be_.for_each(kn, MixModes<T>{mix_.data(), d_.modes, d_.n(), probe_tmp_.data(), probe_.data()});
        probe_spec_valid_ = probe_spec_has_probe_ = false;
    }

    /// The complex object, for the caller (and the simulator).
    std::vector<std::complex<double>> complex_object() {
        std::vector<C> tmp(object_.size());
        be_.download(tmp.data(), object_.data(), tmp.size());
        std::vector<std::complex<double>> out(tmp.size());
        for (size_t i = 0; i < tmp.size(); ++i) out[i] = {double(tmp[i].re), double(tmp[i].im)};
        return out;
    }

    /**
     * Forward model only: sum_k |F_ortho(P_jk O_j)|^2 for each batch position (b x n, FFT order),
     * the noiseless patterns the simulator draws counts from.
     */
    std::vector<double> model_intensity(const BatchSpec& batch) {
        const std::int64_t b = static_cast<std::int64_t>(batch.pattern_of.size());
        const std::int64_t n = d_.n();
        forward_far_field(batch);
        Buffer<T> inten(static_cast<size_t>(b * n));
        be_.for_each_rows(b, static_cast<int>(n), ModelIntensity<T>{d_, psi_.data(), inten.data()});
        std::vector<T> tmp(static_cast<size_t>(b * n));
        be_.download(tmp.data(), inten.data(), tmp.size());
        return std::vector<double>(tmp.begin(), tmp.end());
    }

    /**
     * Bytes moved through memory per batch position by gradients() (the model behind the
     * bandwidth fraction the benchmark reports): element-wise passes as documented on each
     * functor, each FFT counted as 2 passes (read + write; cuFFT and FFTW do 128 x 128 in
     * one or two passes), index and gather traffic ignored.
     */
    double traffic_bytes(bool probe_grad, bool position_grad) const {
        const double c = static_cast<double>(sizeof(C));
        const double kn = static_cast<double>(d_.modes) * static_cast<double>(d_.n());
        const double n = static_cast<double>(d_.n());
        const bool gp_fft = o_.subpixel && (probe_grad || position_grad);
        double passes = 0;  // b x K x n complex passes
        double per_pixel = 4.0 /* pattern */ + c /* patch grad write */ + c /* gather read */;
        if (window_n_) {
            // Window-resident passes: the transforms stay in the block's window. Counted: far
            // fields written and read once, the shifted probes (sub-pixel) and the probe-gradient
            // tensor written and read once, the modulus factor written and read. Not counted:
            // each block's own b x n rows (the intensity and patch-gradient sums), re-read per
            // mode from cache, and the tables the loads read (probe spectrum, ramps, object).
            passes += 2;
            if (o_.subpixel) passes += 2;
            if (probe_grad) passes += 2;
            per_pixel += 4.0 + 4.0;
            return passes * kn * c + n * per_pixel;
        }
        if (o_.subpixel) passes += 1 + 2 + 2;  // spectrum write, IFFT, exit (read pshift, write psi)
        else passes += 1;                      // exit (write)
        passes += 2;                           // FFT
        passes += 2;                           // modulus (read, write)
        passes += 2;                           // IFFT
        passes += o_.subpixel ? 3 : 2;         // patch gradients: psi read+write (+ pshift read)
        if (gp_fft) {
            passes += 2;  // FFT of G_P
            // spectrum sum and position terms (one read of F G_P when one pass does both)
            passes += merged_used_ ? 1 : (probe_grad ? 1 : 0) + (position_grad ? 1 : 0);
        } else if (probe_grad) {
            passes += 1;
        }
        // Multislice, per further slice: forward FFT, propagator, inverse FFT, transmission
        // (psi and chi) = 9; backward: patch gradients (chi, psi in and out), FFT, adjoint,
        // inverse FFT = 9; and one more patch-gradient row per slice.
        passes += 18.0 * (o_.slices - 1);
        per_pixel += 2.0 * c * (o_.slices - 1);
        return passes * kn * c + n * per_pixel;
    }

   private:
    template <class U>
    void zero(Buffer<U>& b) {
        be_.for_each(static_cast<std::int64_t>(b.size()), FillValue<U>{b.data(), U{}});
    }

    void upload_real(const std::vector<double>& src, Buffer<T>& dst) {
        std::vector<T> tmp(src.begin(), src.end());
        be_.upload(dst.data(), tmp.data(), tmp.size());
    }
    void download_real(Buffer<T>& src, std::vector<double>& dst) {
        std::vector<T> tmp(src.size());
        be_.download(tmp.data(), src.data(), tmp.size());
        dst.assign(tmp.begin(), tmp.end());
    }
    void refresh_object() { be_.for_each(object_n(), ObjectFromParams<T>{o_.amplitude_phase, p0_.data(), p1_.data(), object_.data()}); }

    AdamCoefficients<T> coefficients(const UpdateSpec& u, double lr, std::int64_t t) const {
        const double bc1 = 1.0 - std::pow(u.beta1, static_cast<double>(t));
        const double bc2 = 1.0 - std::pow(u.beta2, static_cast<double>(t));
        return {static_cast<T>(lr / bc1), static_cast<T>(u.beta1), static_cast<T>(u.beta2), static_cast<T>(u.eps),
                static_cast<T>(1.0 / std::sqrt(bc2)), static_cast<T>(u.grad_scale)};
    }

    /// Stages the batch and leaves F_u of the exit waves in psi_ (and the shifted probes in pshift_).
    void forward_far_field(const BatchSpec& batch) {
        const std::int64_t b = static_cast<std::int64_t>(batch.pattern_of.size());
        const int n = static_cast<int>(d_.n());
        const std::int64_t rows = b * d_.modes;
        be_.mark("stage");
        stage_batch(batch);
        ensure_workspace(b);
        be_.mark("shifted probes");
        if (o_.subpixel) {
            ensure_probe_spectrum();
            be_.for_each(b * (d_.h + d_.w), RampTable<T>{d_, shift_.data(), ramp_.data()});
            be_.for_each_rows(rows, n, ShiftedProbeSpectrum<T>{d_, probe_spec_.data(), ramp_.data(), pshift_.data()});
            be_.fft_batch(pshift_.data(), rows, true);
        }
        be_.mark("exit waves, fft");
        const Cx<T>* probe = o_.subpixel ? pshift_.data() : probe_.data();
        be_.for_each_rows(rows, n, ExitWave<T>{d_, probe, o_.subpixel, object_.data(), crop_.data(), psi_.data()});
        if (o_.slices > 1) propagate_slices(rows);
        be_.fft_batch(psi_.data(), rows, false);
    }

    /// Multislice forward: the wave leaving slice 0 (in psi_) through slices 1 .. S-1, keeping
    /// each slice's incident wave in chi_ for the backward pass.
    void propagate_slices(std::int64_t rows) {
        const int n = static_cast<int>(d_.n());
        be_.mark("multislice forward");
        for (std::int64_t s = 1; s < o_.slices; ++s) {
            be_.fft_batch(psi_.data(), rows, false);
            be_.for_each_rows(rows, n, PropagateSlice<T>{n, false, propagator_.data(), psi_.data()});
            be_.fft_batch(psi_.data(), rows, true);
            be_.for_each_rows(rows, n,
                              SliceTransmit<T>{d_, object_.data() + s * d_.obj_n(), crop_.data(), psi_.data(),
                                               chi_.data() + (s - 1) * rows * n});
        }
    }

    /// Multislice backward: from the exit-wave gradient in psi_, each slice s = S-1 .. 1's patch
    /// gradients (the conj(chi_s) products) and the gradient of the wave leaving slice s - 1,
    /// propagated back by the adjoint; psi_ then holds slice 0's exit-wave gradient.
    void back_propagate_slices(std::int64_t b) {
        const int n = static_cast<int>(d_.n());
        const std::int64_t rows = b * d_.modes;
        be_.mark("multislice backward");
        for (std::int64_t s = o_.slices - 1; s >= 1; --s) {
            be_.for_each_rows(b, n,
                              PatchGradients<T>{d_, chi_.data() + (s - 1) * rows * n, true, object_.data() + s * d_.obj_n(),
                                                crop_.data(), psi_.data(), patch_grad_.data() + s * b * n});
            be_.fft_batch(psi_.data(), rows, false);
            be_.for_each_rows(rows, n, PropagateSlice<T>{n, true, propagator_.data(), psi_.data()});
            be_.fft_batch(psi_.data(), rows, true);
        }
    }

    void ensure_probe_spectrum() {
        if (probe_spec_valid_) return;
        spec_slots_valid_ = false;
        if (!probe_spec_has_probe_) be_.for_each(d_.modes * d_.n(), CopyValue<C>{probe_.data(), probe_spec_.data()});
        probe_spec_has_probe_ = false;
        be_.fft(probe_spec_.data(), d_.modes, false);
        probe_spec_valid_ = true;
    }

    /// The probe spectrum and its slot-order copy for the window passes (a new spectrum
    /// invalidates the copy).
    void ensure_spectrum_slots() {
        ensure_probe_spectrum();
        if (spec_slots_valid_) return;
        const std::int64_t kn = d_.modes * d_.n();
        if (spec_slots_.size() < probe_spec_.size()) spec_slots_.resize(probe_spec_.size());
        if (window_n_ == 128) be_.for_each(kn, SpectrumToSlots<T, 128>{probe_spec_.data(), spec_slots_.data()});
        else if (window_n_ == 64) be_.for_each(kn, SpectrumToSlots<T, 64>{probe_spec_.data(), spec_slots_.data()});
        else be_.for_each(kn, SpectrumToSlots<T, 32>{probe_spec_.data(), spec_slots_.data()});
        spec_slots_valid_ = true;
    }

    /// The batch tensors psi_ and pshift_ hold be_.fft_rows(b K) windows: the backend's batched
    /// FFTs may run on whole chunks of a fixed count (fft_batch), past the batch's last window.
    void ensure_workspace(std::int64_t b) {
        const size_t rows = static_cast<size_t>(b * d_.modes * d_.n());
        const size_t need = static_cast<size_t>(be_.fft_rows(b * d_.modes) * d_.n());
        batch_ = b;
        if (psi_.size() < need) {
            psi_.resize(need);
            if (o_.subpixel) pshift_.resize(need);
        }
        if (patch_grad_.size() < static_cast<size_t>(o_.slices * b * d_.n())) {
            patch_grad_.resize(static_cast<size_t>(o_.slices * b * d_.n()));
            factor_.resize(static_cast<size_t>(b * d_.n()));
            if (o_.slices > 1) chi_.resize(static_cast<size_t>(o_.slices - 1) * rows);
        }
    }

    /// Crops, shifts and per-row candidate lists on the host, then one upload.
    void stage_batch(const BatchSpec& batch) {
        const size_t b = batch.pattern_of.size();
        std::vector<int> crop(2 * b);
        std::vector<T> shift(2 * b);
        for (size_t j = 0; j < b; ++j) {
            double sy = 0, sx = 0;
            split_position(batch.positions[2 * j], d_.h, d_.obj_h, crop[2 * j], sy);
            split_position(batch.positions[2 * j + 1], d_.w, d_.obj_w, crop[2 * j + 1], sx);
            shift[2 * j] = o_.subpixel ? static_cast<T>(sy) : T(0);
            shift[2 * j + 1] = o_.subpixel ? static_cast<T>(sx) : T(0);
        }
        // CSR: for each object row, the batch positions whose window covers it, by the window's
        // left column (then position): ObjectGradient visits only those covering its pixel.
        std::vector<int> start(static_cast<size_t>(d_.obj_h) + 1, 0);
        for (size_t j = 0; j < b; ++j)
            for (int r = 0; r < d_.h; ++r) ++start[static_cast<size_t>(crop[2 * j] + r) + 1];
        for (size_t y = 0; y < static_cast<size_t>(d_.obj_h); ++y) start[y + 1] += start[y];
        std::vector<int> items(static_cast<size_t>(start.back()));
        std::vector<int> fill(start.begin(), start.end() - 1);
        std::vector<int> by_column(b);
        std::iota(by_column.begin(), by_column.end(), 0);
        std::stable_sort(by_column.begin(), by_column.end(), [&](int a, int c) { return crop[2 * a + 1] < crop[2 * c + 1]; });
        for (const int j : by_column)
            for (int r = 0; r < d_.h; ++r) items[static_cast<size_t>(fill[static_cast<size_t>(crop[2 * j] + r)]++)] = j;
        if (ramp_.size() < b * static_cast<size_t>(d_.h + d_.w)) ramp_.resize(b * static_cast<size_t>(d_.h + d_.w));
        // One staging block (page-locked on the GPU) and one copy: the batch's index arrays are
        // a few hundred kB, so per-copy latency, not bandwidth, is what costs.
        size_t bytes = 0;
        auto place = [&](size_t count, size_t size) {
            const size_t at = (bytes + 7) / 8 * 8;
            bytes = at + count * size;
            return at;
        };
        const size_t o_crop = place(crop.size(), sizeof(int)), o_shift = place(shift.size(), sizeof(T));
        const size_t o_pat = place(b, sizeof(std::int64_t)), o_start = place(start.size(), sizeof(int));
        const size_t o_items = place(items.size(), sizeof(int));
        if (stage_host_.size() < bytes) stage_host_.resize(bytes);
        // Two staging areas in turn: the copy of this batch's may run while the last batch's
        // work reads the other (Backend::upload_staged).
        Buffer<unsigned char>& stage_dev = stage_dev_[stage_turn_++ % 2];
        if (stage_dev.size() < bytes) stage_dev.resize(bytes);
        unsigned char* h = stage_host_.data();
        std::memcpy(h + o_crop, crop.data(), crop.size() * sizeof(int));
        std::memcpy(h + o_shift, shift.data(), shift.size() * sizeof(T));
        if (streamed_)  // the batch's rows in the slot, in batch order (stream_batch())
            for (size_t j = 0; j < b; ++j) reinterpret_cast<std::int64_t*>(h + o_pat)[j] = static_cast<std::int64_t>(j);
        else
            std::memcpy(h + o_pat, batch.pattern_of.data(), b * sizeof(std::int64_t));
        std::memcpy(h + o_start, start.data(), start.size() * sizeof(int));
        std::memcpy(h + o_items, items.data(), items.size() * sizeof(int));
        be_.upload_staged(stage_dev.data(), h, bytes);  // through page-locked memory on the GPU; no wait
        unsigned char* dv = stage_dev.data();
        crop_.p = reinterpret_cast<int*>(dv + o_crop);
        shift_.p = reinterpret_cast<T*>(dv + o_shift);
        pattern_of_.p = reinterpret_cast<std::int64_t*>(dv + o_pat);
        row_start_.p = reinterpret_cast<int*>(dv + o_start);
        row_items_.p = reinterpret_cast<int*>(dv + o_items);
        batch_patterns_ = patterns_.data();
        if constexpr (kStreams)
            if (streamed_)
                batch_patterns_ = be_.stream_batch(batch.pattern_of.data(), static_cast<std::int64_t>(b), d_.n());
    }
    /// The batch's patterns for the kernels that read them: the resident share, or the
    /// streamed batch's slot once its copy is in (the compute stream waits for it here, as late
    /// as possible, so that the copy overlaps the work queued before).
    const float* batch_patterns() {
        if constexpr (kStreams)
            if (streamed_) be_.stream_wait();
        return batch_patterns_;
    }

    /// The object gather from the patch gradients, then the gradient buffer to where the
    /// caller sums it (both sequences end so).
    void object_gradient() {
        const std::int64_t on = object_n(), sn = d_.obj_n();
        if (!side_gather_) be_.mark("object gradient");  // phases are marked on the main stream
        // Slice s: its patch gradients (b x n, after slice s - 1's), parameters and gradients.
        for (std::int64_t s = 0; s < o_.slices; ++s)
            be_.for_each_rows(d_.obj_h, d_.obj_w,
                              ObjectGradient<T>{d_, o_.amplitude_phase, crop_.data(), row_start_.data(), row_items_.data(),
                                                patch_grad_.data() + s * batch_ * d_.n(), p0_.data() + s * sn,
                                                p1_.data() + s * sn, grad_.data() + s * sn, grad_.data() + on + s * sn});
    }
    void object_gradient_and_finish(bool probe_grad) {
        object_gradient();
        be_.mark("finish");
        finish_gradients(probe_grad);
    }

    /// Per-position loss terms (and position gradients) into `out`, summed in batch order.
    static void collect_terms(const std::vector<Sum2>& per, const std::vector<Sum2>& pg, BatchTerms& out) {
        out.position_terms.resize(2 * per.size());
        for (size_t j = 0; j < per.size(); ++j) {  // in batch order: deterministic
            out.position_terms[2 * j] = per[j].a;
            out.position_terms[2 * j + 1] = per[j].b;
            out.loss_a += per[j].a;
            out.loss_b += per[j].b;
        }
        for (size_t j = 0; j < pg.size(); ++j) {
            out.position_grad[2 * j] = pg[j].a;
            out.position_grad[2 * j + 1] = pg[j].b;
        }
    }

    int window_freq_of_slot(int s) const {
        if (window_n_ == 128) return wfft::Layout<128>::freq_of_slot2(s);
        if (window_n_ == 64) return wfft::Layout<64>::freq_of_slot2(s);
        return wfft::Layout<32>::freq_of_slot2(s);
    }

    /**
     * gradients() with the window-resident passes (window_passes.hpp): forward and loss, backward,
     * then the probe-spectrum sum and the object gather as in the other sequence.
     */
    template <int N>
    BatchTerms window_gradients(const BatchSpec& batch, bool probe_grad, bool position_grad) {
        const std::int64_t b = static_cast<std::int64_t>(batch.pattern_of.size());
        const std::int64_t n = d_.n();
        const std::int64_t K = d_.modes;
        const std::int64_t on = d_.obj_n();
        const bool shifted = o_.subpixel;
        const bool gp_fft = shifted && (probe_grad || position_grad);
        BatchTerms out;
        if (position_grad) out.position_grad.assign(static_cast<size_t>(2 * b), 0.0);
        be_.mark("stage");
        stage_batch(batch);
        ensure_workspace(b);
        if (shifted) {
            be_.mark("probe spectrum");
            ensure_spectrum_slots();
            be_.mark("ramps");
            be_.for_each(b * (d_.h + d_.w), RampTable<T>{d_, shift_.data(), ramp_.data()});
        }
        const int G = window_groups(batch_hint_ > 0 ? batch_hint_ : b);
        if (G > 1) {
            if (inten_part_.size() < static_cast<size_t>(b * G * n)) inten_part_.resize(static_cast<size_t>(b * G * n));
            if (patch_part_.size() < static_cast<size_t>(b * G * n)) patch_part_.resize(static_cast<size_t>(b * G * n));
        }
        Sum2* const sink = sink_;  // deferred steps: loss terms and position gradients stay on the device
        Sum2* const pos_sink = position_grad ? pos_sink_ : nullptr;
        const bool want_pg = position_grad && gp_fft;
        std::vector<Sum2> per(sink ? 0 : static_cast<size_t>(b));
        Sum2* const per_out = sink ? sink : per.data();
        std::vector<Sum2> pg(want_pg && !pos_sink ? static_cast<size_t>(b) : 0);
        std::vector<Sum2> pg_part(G > 1 ? pg.size() * static_cast<size_t>(G) : 0);
        if (pos_sink && want_pg && G > 1 && pg_part_.size() < static_cast<size_t>(b * G))
            pg_part_.resize(static_cast<size_t>(b * G));
        Sum2* const pg_out = pos_sink ? pos_sink : pg.data();
        Sum2* const pg_part_out = pos_sink ? pg_part_.data() : pg_part.data();
        const float* patterns = batch_patterns();
        be_.mark("window forward");
        WindowForward<T, N> fwd{d_, o_.loss, shifted, twiddle_.data(), probe_.data(), spec_slots_.data(),
                                ramp_.data(), object_.data(), crop_.data(), patterns,
                                pattern_of_.data(), psi_.data(), factor_.data(), pshift_.data()};
        fwd.groups = G;
        fwd.inten_part = inten_part_.data();
        // The position's groups as a cluster of blocks (GPU): the forward pass adds their
        // intensities itself, and the loss terms come per group, added in group order.
        const bool clusters = G > 1 && be_.template window_clusters<WindowForward<T, N>>(G);
        be_.window_pass(fwd, b * G, G == 1 || clusters ? per_out : nullptr, sink != nullptr, clusters ? G : 1);
        be_.count_fft(b * K * (shifted ? 2 : 1));  // the pass's FFTs (an inverse for the shifted probe)
        if (G > 1 && !clusters) {
            be_.mark("window modulus");
            be_.reduce_groups(b, n,
                              WindowModulus<T, N>{o_.loss, G, inten_part_.data(), patterns, pattern_of_.data(),
                                                  factor_.data()},
                              per_out, sink != nullptr);
        }
        be_.mark("window backward");
        WindowBackward<T, N> bwd{d_, shifted, probe_grad, position_grad && gp_fft, twiddle_.data(),
                                 probe_.data(), spec_slots_.data(), ramp_.data(), object_.data(),
                                 crop_.data(), factor_.data(), psi_.data(), pshift_.data(),
                                 G > 1 ? patch_part_.data() : patch_grad_.data()};
        bwd.groups = G;
        be_.window_pass(bwd, b * G, !want_pg ? nullptr : G > 1 ? pg_part_out : pg_out, pos_sink != nullptr);
        be_.count_fft(b * K * (gp_fft ? 2 : 1));  // an inverse, and a forward for the probe gradient
        // Deferred steps: the mode groups' sums and the object gather on the side stream, beside
        // the probe-gradient spectrum (and, with peer sums, the object's part of the sum beside
        // the probe's: sum_split()).
        side_gather_ = deferred_;
        if (side_gather_) be_.side_begin();
        if (want_pg && G > 1 && pos_sink)  // the groups' position terms, in group order, on the device
            be_.for_each(b, SumInGroupOrder{G, pg_part_.data(), pos_sink});
        if (G > 1) be_.for_each_rows(b, static_cast<int>(n), SumModeGroups<T>{static_cast<int>(n), G, patch_part_.data(), patch_grad_.data()});
        Cx<double>* grad_probe = reinterpret_cast<Cx<double>*>(grad_.data() + 2 * on);
        if (side_gather_) {
            object_gradient();
            be_.side_end();
        }
        if (probe_grad) {
            be_.mark("probe gradient");
            if (gp_fft)
                be_.for_each(ProbeSpectrumFromSlots<T, N>::elements(d_),
                             ProbeSpectrumFromSlots<T, N>{ProbeGradientSpectrum<T>{d_, b, ramp_.data(), psi_.data(), grad_probe}});
            else
                be_.for_each(K * n, ProbeGradientDirect<T>{d_, b, psi_.data(), grad_probe});
        }
        if (side_gather_) finish_gradients(probe_grad);
        else object_gradient_and_finish(probe_grad);
        for (size_t j = 0; j < pg.size(); ++j)  // the groups' position terms, in group order
            for (int g = 0; g < G && G > 1; ++g) pg[j] += pg_part[j * static_cast<size_t>(G) + static_cast<size_t>(g)];
        if (!sink) collect_terms(per, pg, out);
        return out;
    }

    /**
     * Mode groups of the window passes, from the whole batch size S (the schedule's strata, never
     * this rank's share of it: the groups change how the modes' intensities and patch gradients
     * are added, so a share-dependent choice would make the bits depend on the rank count and on
     * throughput balancing). A divisor G of K that minimises the modes one block slot works
     * through, ceil(b G / P) waves of K / G modes with P blocks at a time
     * (Backend::parallel_units: one per multiprocessor; 0 on the CPU, one group), summed over the
     * shares of 1, 2 and 4 devices (b = S, S/2, S/4), the fewest groups among equals (each group
     * adds partial sums). On 132 SMs with K = 12 and S = 256: 2 groups of 6 modes (b = 256 and 128
     * take as many waves with 2 groups as with 1, b = 64 half as many). EngineOptions::window_groups
     * (tuning.window_groups) forces G where it divides K.
     */
    int window_groups(std::int64_t S) const {
        const int K = d_.modes;
        const int forced = o_.window_groups;
        if (forced >= 1 && forced <= K && K % forced == 0) return forced;
        const std::int64_t P = be_.parallel_units();
        if (P <= 0 || S <= 0) return 1;
        int G = 1;
        std::int64_t best = 0;
        for (int g = 1; g <= K; ++g) {
            if (K % g) continue;
            std::int64_t cost = 0;
            for (std::int64_t share : {S, (S + 1) / 2, (S + 3) / 4}) cost += (share * g + P - 1) / P * (K / g);
            if (g == 1 || cost < best) {
                G = g;
                best = cost;
            }
        }
        return G;
    }

    void finish_gradients(bool probe_grad) {
        if constexpr (!Backend::kHostMemory)
            if (!device_only_) be_.download(host_grad_.data(), grad_.data(), gradient_size(probe_grad));
        if (!deferred_) be_.synchronize();
    }

    Backend& be_;
    PtychoDims d_;
    EngineOptions o_;
    Buffer<float> patterns_;  // the resident share (empty when streamed)
    std::int64_t pattern_count_ = 0;
    /// Backends that can keep the patterns in host memory and copy them batch by batch.
    static constexpr bool kStreams = requires(Backend& be, const std::int64_t* rows) {
        be.stream_patterns(std::size_t{}, std::size_t{}, std::size_t{});
        be.stream_batch(rows, std::int64_t{}, std::int64_t{});
        be.stream_wait();
    };
    bool streamed_ = false;
    std::int64_t batch_hint_ = 0;
    const float* batch_patterns_ = nullptr;  // the staged batch's patterns (stage_batch())
    Buffer<T> p0_, p1_, m0_, v0_, m1_, v1_;
    Buffer<C> object_, probe_, probe_spec_, probe_tmp_;
    Buffer<C> spec_slots_;  // the window passes' copy of probe_spec_, slot order
    Buffer<T> mp_, vp_;
    Buffer<Cx<double>> mix_;  // mix_probe_modes()
    Buffer<double> grad_;
    Buffer<C> psi_, pshift_, patch_grad_;  // patch_grad_: S x b x n (slice after slice)
    Buffer<C> chi_;         // multislice: the waves incident on slices 1 .. S-1, (S-1) x b x K x n
    Buffer<C> propagator_;  // multislice: one slice's Fresnel propagator / n (fresnel_propagator())
    std::int64_t batch_ = 0;  // positions of the batch being computed (ensure_workspace())
    Buffer<T> factor_;  // b x n modulus factors (window passes)
    Buffer<C> twiddle_;     // window passes: W_N^k table
    Buffer<T> inten_part_;  // window passes with mode groups: b x G x n partial intensities
    Buffer<C> patch_part_;  // and patch gradients
    int window_n_ = 0;              // window size of the window-resident passes, 0 when off
    /// A typed place in the staging block.
    template <class U>
    struct Staged {
        U* p = nullptr;
        U* data() const { return p; }
    };
    std::vector<unsigned char> stage_host_;
    Buffer<unsigned char> stage_dev_[2];
    unsigned stage_turn_ = 0;
    Staged<int> crop_, row_start_, row_items_;
    Staged<T> shift_;
    Buffer<C> ramp_;  // b x (h + w) Fourier shift factors
    Staged<std::int64_t> pattern_of_;
    typename Backend::template HostBuffer<double> host_grad_;
    bool device_only_ = false;
    // deferred steps
    bool deferred_ = false;
    bool side_gather_ = false;  // the last gradients' object gather ran on the side stream
    Sum2* sink_ = nullptr;          // where gradients() puts the per-position loss terms (device)
    Sum2* pos_sink_ = nullptr;      // and the position gradients
    Buffer<Sum2> pos_grads_;        // the iteration's position gradients, batch after batch
    std::int64_t pos_used_ = 0;
    Buffer<Sum2> pg_part_;          // position terms per mode group (window passes)
    Buffer<Sum2> terms_;            // the batch's loss terms in global batch order
    std::int64_t terms_count_ = 0;  // positions in the current batch, all ranks
    Buffer<double> losses_;         // each deferred batch's loss
    Buffer<double> scale_;          // each deferred batch's loss factor c
    bool probe_spec_valid_ = false;
    bool probe_spec_has_probe_ = false;  // probe_spec_ holds a copy of probe_ (the Adam step wrote it)
    bool spec_slots_valid_ = false;  // spec_slots_ is probe_spec_ in slot order (window passes)
    bool merged_used_ = false;  // the last batch summed probe spectrum and position terms in one pass
};

}  // namespace ef::recon
