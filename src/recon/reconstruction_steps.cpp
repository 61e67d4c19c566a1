// SPDX-License-Identifier: MIT
// The reconstruction's iterations: mini-batch steps (per batch, or deferred on the device), the
// per-iteration probe constraints, position steps and the shares that follow throughput.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <ensemblefit/core/error.hpp>

#include "src/recon/reconstruction.hpp"
#include "src/run/run_failure.hpp"

namespace ef::recon {

namespace {

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The loss is a sum over every rank (both protocols), so every rank finds it non-finite at the
/// same batch: an agreed failure, one line from rank 0 and exit 3 (the data and the rates do not
/// go together; not a bug), no abort.
AgreedFailure diverged(double loss, int it) {
    return AgreedFailure(data_error("reconstruction diverged: the loss is " + std::to_string(loss) +
                                    " at iteration " + std::to_string(it) + " (lower the learning rates)"));
}

/// `[solver] loss` as the kernels take it.
LossKind loss_kind_of(const std::string& loss) { return loss == "poisson" ? LossKind::poisson : LossKind::amplitude; }

}  // namespace

void Reconstruction::iterate() {
    timer_.enter(Phase::compute);  // loop bookkeeping counts as compute
    if (ctx_.is_root() && cfg_.iterations > 0) {
        std::printf("\n%s\n", progress_header(!truth_.empty()).c_str());
        std::fflush(stdout);
    }
    last_checkpoint_ = now_seconds();
    for (int it = resume_.from + 1; it <= cfg_.iterations; ++it) {
        const double wall0 = now_seconds();
        const IterationSteps steps = iteration_batches(it);
        if (end_iteration(it, steps, wall0)) return;  // stopped (a checkpoint is written)
    }
}

/// Iteration `it`'s mini-batches over this rank's share, then the probe's constraints: what
/// iterate() runs, and the defocus trials (choose_defocus) before it.
IterationSteps Reconstruction::iteration_batches(int it) {
    const size_t r = static_cast<size_t>(ctx_.rank());
    schedule_->start_iteration(it, bounds_[r], bounds_[r + 1]);
    IterationSteps steps = steps_of(it);
    const std::int64_t nb = schedule_->batches_per_iteration();
    if (plan_.deferred) batches_deferred(it, nb, steps);  // the whole iteration queued on the device
    else
        for (std::int64_t t = 0; t < nb; ++t) batch_step(it, t, steps);
    if (steps.probe_on && (cfg_.orthogonalize || cfg_.fix_intensity)) {
        PhaseTimer::Scope c(timer_, Phase::compute);
        constrain_probe();
    }
    return steps;
}

/// What iteration `it` updates, and its learning-rate factor: 1, or a half cosine from 1 at
/// decay_start to decay_to at the end.
IterationSteps Reconstruction::steps_of(int it) const {
    IterationSteps st;
    st.probe_on = it >= cfg_.probe_start && cfg_.lr_probe > 0;
    st.pos_on = cfg_.correct_positions && it >= cfg_.positions_start && cfg_.lr_positions > 0;
    if (cfg_.decay_start > 0 && it >= cfg_.decay_start && cfg_.iterations > cfg_.decay_start) {
        const double x = static_cast<double>(it - cfg_.decay_start) / (cfg_.iterations - cfg_.decay_start);
        st.rate = cfg_.decay_to + (1 - cfg_.decay_to) * 0.5 * (1 + std::cos(M_PI * x));
    }
    st.loss_kind = loss_kind_of(cfg_.loss);
    return st;
}

/// The iteration's loss and time, the progress line, a checkpoint, new shares; true when the
/// ranks agreed to stop here (a stop signal).
bool Reconstruction::end_iteration(int it, const IterationSteps& st, double wall0) {
    loss_.push_back(st.loss_sum / static_cast<double>(schedule_->batches_per_iteration()));
    iteration_seconds_.push_back(now_seconds() - wall0);
    grad_seconds_total_ += st.grad_seconds;
    speed_seconds_total_ += st.speed_seconds;
    positions_done_ += st.done;
    batches_done_ += st.batches;
    const int report_every = cfg_.report_every > 0 ? cfg_.report_every : std::max(1, cfg_.iterations / 20);
    if (it % report_every == 0 || it == cfg_.iterations) report(it);
    if (it == cfg_.iterations) return false;  // the final write follows
    const Boundary b = at_boundary(it);
    if (b.checkpoint) {
        write_output(false);
        last_checkpoint_ = now_seconds();
    }
    stopped_ = b.stop;
    if (stopped_) return true;
    if (cfg_.balance == "throughput" && ctx_.size() > 1 && (it <= 2 || it % 10 == 0)) rebalance();
    return false;
}

/// This rank's part of a batch: its rows of the pattern share and their positions.
ReconBatch Reconstruction::assemble(const std::vector<std::int64_t>& members) const {
    ReconBatch batch;
    batch.pattern_of.reserve(members.size());
    batch.positions.reserve(2 * members.size());
    for (std::int64_t idx : members) {
        batch.pattern_of.push_back(idx - my_first_);
        batch.positions.push_back(ds_.positions[static_cast<size_t>(2 * idx)]);
        batch.positions.push_back(ds_.positions[static_cast<size_t>(2 * idx + 1)]);
    }
    return batch;
}

/// Positions of batch t per rank, and where each rank's start in global batch order; the total.
std::int64_t Reconstruction::batch_layout(std::int64_t t, std::vector<int>& counts, std::vector<int>& starts) const {
    counts.assign(static_cast<size_t>(ctx_.size()), 0);
    starts.assign(counts.size(), 0);
    int total = 0;
    for (int r = 0; r < ctx_.size(); ++r) {
        int c = 0;
        for (std::int64_t s = bounds_[static_cast<size_t>(r)]; s < bounds_[static_cast<size_t>(r) + 1]; ++s)
            c += t < schedule_->stratum_size(s) ? 1 : 0;
        counts[static_cast<size_t>(r)] = c;
        starts[static_cast<size_t>(r)] = total;
        total += c;
    }
    return total;
}

/// The Adam step of a batch (scale: the loss factor; deferred steps compute it on the device).
ReconUpdate Reconstruction::next_update(const IterationSteps& st, double scale) {
    ReconUpdate u;
    u.object = true;
    u.probe = st.probe_on;
    u.grad_scale = scale;
    u.lr_p0 = st.rate * cfg_.lr_amplitude;
    u.lr_p1 = st.rate * cfg_.lr_phase;
    u.lr_probe = st.rate * cfg_.lr_probe * std::sqrt(mean_total_ / static_cast<double>(n_));  // relative rate
    u.beta1 = cfg_.beta1;
    u.beta2 = cfg_.beta2;
    u.eps = cfg_.epsilon;
    u.t_object = ++t_object_;
    u.t_probe = st.probe_on ? ++t_probe_ : t_probe_;
    return u;
}

/// Doubles of the gradient buffer: the object's two parameters, then the probe when asked.
std::int64_t Reconstruction::gradient_doubles(bool with_probe) const {
    return 2 * static_cast<std::int64_t>(ds_.obj_h) * ds_.obj_w + (with_probe ? 2 * cfg_.modes * n_ : 0);
}

/**
 * One batch, waiting for it: gradients, the sum over ranks (on the devices, or MPI over host
 * buffers) with the loss terms gathered meanwhile, the loss factor on the host, Adam.
 */
void Reconstruction::batch_step(int it, std::int64_t t, IterationSteps& st) {
    const double m0 = now_seconds();
    const std::vector<std::int64_t> members = schedule_->members(t);
    const ReconBatch batch = assemble(members);
    comm_trace_[4] += now_seconds() - m0;
    const ReconBatchTerms terms = batch_gradients(batch, st);
    st.done += static_cast<std::int64_t>(members.size());
    st.batches += members.empty() ? 0 : 1;
    LossSums sums{terms.loss_a, terms.loss_b, static_cast<double>(members.size()) * static_cast<double>(n_)};
    if (ctx_.size() > 1) sums = sum_over_ranks(t, terms, st);
    double loss = 0, scale = 0;
    ptycho_loss_scale(st.loss_kind, sums.a, sums.b, sums.pixels, loss, scale);
    if (!std::isfinite(loss)) throw diverged(loss, it);
    st.loss_sum += loss;
    PhaseTimer::Scope c(timer_, Phase::compute);
    const double u0 = now_seconds();
    worker_->update(next_update(st, scale));
    comm_trace_[2] += now_seconds() - u0;
    if (st.pos_on) update_positions(members, terms.position_grad.data(), scale, position_steps(it), st.rate);
    comm_trace_[3] += now_seconds() - u0;
}

ReconBatchTerms Reconstruction::batch_gradients(const ReconBatch& batch, IterationSteps& st) {
    PhaseTimer::Scope c(timer_, Phase::compute);
    const double g0 = now_seconds();
    ReconBatchTerms terms = worker_->gradients(batch, st.probe_on, st.pos_on);
    st.grad_seconds += now_seconds() - g0;
    st.speed_seconds += now_seconds() - g0;
    return terms;
}

/**
 * The gradient buffer summed over ranks in place (on the devices, or MPI over host buffers),
 * and the loss terms of every position gathered in global batch order meanwhile, so that the
 * loss factor is the same bits on 1 or N ranks.
 */
LossSums Reconstruction::sum_over_ranks(std::int64_t t, const ReconBatchTerms& terms, const IterationSteps& st) {
    size_t count = 0;
    double* buf = plan_.device_sum ? nullptr : worker_->gradient_buffer(st.probe_on, count);
    std::vector<int> counts, displs;
    const int total = 2 * static_cast<int>(batch_layout(t, counts, displs));
    for (size_t r = 0; r < counts.size(); ++r) {
        counts[r] *= 2;
        displs[r] *= 2;
    }
    std::vector<double> terms_all(static_cast<size_t>(total));
    {
        PhaseTimer::Scope s(timer_, Phase::sync);
        heartbeat_->barrier("the barrier before a batch's gradient sum");
    }
    PhaseTimer::Scope c(timer_, Phase::comm);
    const double c0 = now_seconds();
    if (plan_.device_sum) {
        worker_->device_sum(st.probe_on);
        count = static_cast<size_t>(gradient_doubles(st.probe_on));
    } else {
        MPI_Request req = MPI_REQUEST_NULL;  // nonblocking, so that a rank stopped meanwhile is reported
        EF_MPI_CHECK(
            MPI_Iallreduce(MPI_IN_PLACE, buf, static_cast<int>(count), MPI_DOUBLE, MPI_SUM, ctx_.world(), &req));
        heartbeat_->wait(req, "a batch's gradient sum");
    }
    const double c1 = now_seconds();
    // the loss terms travel while the devices sum
    MPI_Request req = MPI_REQUEST_NULL;
    EF_MPI_CHECK(MPI_Iallgatherv(terms.position_terms.data(), static_cast<int>(terms.position_terms.size()),
                                 MPI_DOUBLE, terms_all.data(), counts.data(), displs.data(), MPI_DOUBLE, ctx_.world(),
                                 &req));
    heartbeat_->wait(req, "a batch's loss terms");
    comm_trace_[1] += now_seconds() - c1;
    if (plan_.device_sum) worker_->device_sum_wait();
    comm_trace_[0] += now_seconds() - c0;
    allreduce_calls_ += 2;
    allreduce_bytes_ += static_cast<double>(count) * 8.0 + 8.0 * total;
    LossSums sums;
    for (int i = 0; i < total; i += 2) {
        sums.a += terms_all[static_cast<size_t>(i)];
        sums.b += terms_all[static_cast<size_t>(i) + 1];
    }
    sums.pixels = static_cast<double>(total / 2) * static_cast<double>(n_);
    return sums;
}

/**
 * An iteration's batches as deferred steps (ReconWorker::begin_deferred): the host queues
 * them all and waits once, then takes the position steps in batch order (the same steps as
 * batch_step(): each position is in one batch of the iteration).
 */
void Reconstruction::batches_deferred(int it, std::int64_t nb, IterationSteps& st) {
    PhaseTimer::Scope c(timer_, Phase::compute);
    const double it0 = now_seconds();
    worker_->begin_deferred(nb, schedule_->strata(), my_count_);
    std::vector<int> counts, starts;
    std::vector<std::vector<std::int64_t>> members(static_cast<size_t>(nb));
    for (std::int64_t t = 0; t < nb; ++t) {
        const double m0 = now_seconds();
        std::vector<std::int64_t>& mine = members[static_cast<size_t>(t)];
        mine = schedule_->members(t);
        const std::int64_t total = batch_layout(t, counts, starts);
        comm_trace_[4] += now_seconds() - m0;
        worker_->gradients_deferred(assemble(mine), st.probe_on, st.pos_on, starts[static_cast<size_t>(ctx_.rank())],
                                    total);
        st.done += static_cast<std::int64_t>(mine.size());
        st.batches += mine.empty() ? 0 : 1;
        if (ctx_.size() > 1) {
            worker_->device_sum(st.probe_on);
            allreduce_calls_ += 1;
            allreduce_bytes_ += 8.0 * static_cast<double>(gradient_doubles(st.probe_on) + 2 * total);
        }
        worker_->update_deferred(next_update(st, 0.0), static_cast<double>(total) * static_cast<double>(n_), t);
    }
    const ReconDeferredResults res = worker_->end_deferred(nb);
    const double* pg = res.position_grad.data();
    for (std::int64_t t = 0; t < nb; ++t) {
        const double loss = res.loss[static_cast<size_t>(t)];
        if (!std::isfinite(loss)) throw diverged(loss, it);
        st.loss_sum += loss;
        if (!st.pos_on) continue;
        const std::vector<std::int64_t>& mine = members[static_cast<size_t>(t)];
        update_positions(mine, pg, res.scale[static_cast<size_t>(t)], position_steps(it), st.rate);
        pg += 2 * mine.size();
    }
    account_device_time(res, st);
    deferred_trace_[5] += now_seconds() - it0;
}

/**
 * The device timeline of deferred steps into the phases: gradients and updates are compute; of
 * the sum over ranks, the shortest rank's time in each batch is communication and the rest of
 * a rank's time waiting for the others (synchronisation); device idle time between batches
 * (the host preparing and launching) is scheduling.
 */
void Reconstruction::account_device_time(const ReconDeferredResults& res, IterationSteps& st) {
    std::vector<double> shortest = res.sum;
    if (ctx_.size() > 1 && !shortest.empty()) {
        MPI_Request req = MPI_REQUEST_NULL;
        EF_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, shortest.data(), static_cast<int>(shortest.size()), MPI_DOUBLE,
                                    MPI_MIN, ctx_.world(), &req));
        heartbeat_->wait(req, "the device-time exchange");
    }
    double grad = 0, sum = 0, comm = 0, update = 0, gap = 0;
    for (size_t t = 0; t < res.sum.size(); ++t) {
        grad += res.gradients[t];
        sum += res.sum[t];
        comm += shortest[t];
        update += res.update[t];
        gap += res.gap[t];
    }
    st.grad_seconds += grad;
    // The rank's speed from its median batch: the device times are exact, but a first
    // iteration's batches include one-off costs (kernel modules loaded on first launch) that
    // differ between ranks and would move shares for nothing.
    if (!res.gradients.empty()) {
        std::vector<double> g = res.gradients;
        std::nth_element(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(g.size() / 2), g.end());
        st.speed_seconds += g[g.size() / 2] * static_cast<double>(g.size());
    }
    timer_.move(Phase::compute, Phase::comm, comm);
    timer_.move(Phase::compute, Phase::sync, sum - comm);
    timer_.move(Phase::compute, Phase::sched, gap);
    const double parts[5] = {grad, sum, comm, update, gap};
    for (int k = 0; k < 5; ++k) deferred_trace_[k] += parts[k];
}

/**
 * PtyRAD's per-iteration probe constraints where the probe lives: the modes' Gram matrix comes
 * to the host (K x K), its eigenvectors (orthogonalisation, modes by power) and the intensity
 * factor sqrt(target / trace) make one K x K mixing matrix, applied by the worker. Every rank
 * computes the same matrix from the same Gram matrix.
 */
void Reconstruction::constrain_probe() {
    const int K = cfg_.modes;
    const std::vector<Complex> gram = worker_->probe_gram();
    std::vector<Complex> mix(static_cast<size_t>(K) * static_cast<size_t>(K), 0.0);
    for (int k = 0; k < K; ++k) mix[static_cast<size_t>(k) * static_cast<size_t>(K + 1)] = 1.0;
    if (cfg_.orthogonalize && K > 1) hermitian_eigen(gram, K, mode_powers_, mix);
    if (cfg_.fix_intensity) {
        double power = 0;  // the trace: the modes' power, which the unitary mix keeps
        for (int k = 0; k < K; ++k) power += gram[static_cast<size_t>(k) * static_cast<size_t>(K + 1)].real();
        if (power > 0 && mean_total_ > 0) {
            const double f = std::sqrt(mean_total_ / power);
            for (Complex& z : mix) z *= f;
        }
    }
    worker_->mix_probe_modes(mix);
}

/// The Adam step count of every position at iteration `it`: a position is in one mini-batch per
/// iteration, so its moments have had it - positions.start + 1 updates. Counting batches instead
/// (as before issue 38's travel bound) made the bias corrections ~1 after the first iteration
/// while each position's v had seen a few gradients: steps of 2.5-3.4 x positions.lr.
std::int64_t Reconstruction::position_steps(int it) {
    t_pos_ = std::max<std::int64_t>(1, it - cfg_.positions_start + 1);
    return t_pos_;
}

/// Adam on the positions this rank owns (they are local: no reduction needed).
void Reconstruction::update_positions(const std::vector<std::int64_t>& members, const double* grad, double scale,
                                         std::int64_t t, double rate) {
    AdamCoefficients<double> a{};
    a.step_size = rate * cfg_.lr_positions / (1 - std::pow(cfg_.beta1, static_cast<double>(t)));
    a.beta1 = cfg_.beta1;
    a.beta2 = cfg_.beta2;
    a.eps = cfg_.epsilon;
    a.inv_sqrt_bc2 = 1 / std::sqrt(1 - std::pow(cfg_.beta2, static_cast<double>(t)));
    a.grad_scale = scale;
    for (size_t j = 0; j < members.size(); ++j)
        for (size_t c = 0; c < 2; ++c) {
            const size_t i = static_cast<size_t>(2 * members[j]) + c;
            adam_step(ds_.positions[i], pos_m_[i], pos_v_[i], grad[2 * j + c], a);
            const double hi = static_cast<double>((c == 0 ? ds_.obj_h - ds_.h : ds_.obj_w - ds_.w));
            ds_.positions[i] = std::clamp(ds_.positions[i], 0.0, hi);
        }
    const double bound = plan_.positions_max_travel;
    if (bound > 0)
        for (std::int64_t idx : members) {
            const size_t i = static_cast<size_t>(2 * idx);
            if (std::hypot(ds_.positions[i] - pos_start_[i], ds_.positions[i + 1] - pos_start_[i + 1]) > bound)
                bound_travel(idx);
        }
}

/**
 * positions.max_travel: position `idx` went further than the bound from its start. A gradient
 * only finds the minimum it is in (a couple of pixels wide on atomic detail), and on a nearly
 * periodic object one that starts between minima can slide to an equivalent place a lattice
 * constant away (issue 38). So the position goes to the best point of a 1-pixel grid within the
 * bound around its start: the pattern's loss (the run's, modulus_pixel) under the current object
 * and probe, each candidate through the worker's forward model in chunks of a mini-batch; ties
 * keep the first in row order. Its Adam moments restart. Only this rank's own positions and the
 * same object on every rank: the same choice on 1 or N ranks.
 */
void Reconstruction::bound_travel(std::int64_t idx) {
    const size_t i = static_cast<size_t>(2 * idx);
    const double bound = plan_.positions_max_travel;
    const double hi_y = static_cast<double>(ds_.obj_h - ds_.h), hi_x = static_cast<double>(ds_.obj_w - ds_.w);
    std::vector<double> cand;  // (y, x) pairs
    const int r = static_cast<int>(std::floor(bound));
    for (int dy = -r; dy <= r; ++dy)
        for (int dx = -r; dx <= r; ++dx) {
            const double y = pos_start_[i] + dy, x = pos_start_[i + 1] + dx;
            if (dy * dy + dx * dx <= bound * bound && y >= 0 && y <= hi_y && x >= 0 && x <= hi_x) {
                cand.push_back(y);
                cand.push_back(x);
            }
        }
    if (cand.empty()) {  // the start itself outside the object (cannot happen: the object holds it)
        ds_.positions[i] = pos_start_[i];
        ds_.positions[i + 1] = pos_start_[i + 1];
    } else {
        const std::vector<float> data = read_patterns(ds_, idx, 1, 1);
        const std::int64_t n = static_cast<std::int64_t>(ds_.h) * ds_.w;
        const LossKind kind = loss_kind_of(cfg_.loss);
        const size_t total = cand.size() / 2, chunk = static_cast<size_t>(std::max(1, plan_.batch_size));
        double best = 0;
        size_t best_k = 0;
        for (size_t k0 = 0; k0 < total; k0 += chunk) {
            const size_t b = std::min(chunk, total - k0);
            ReconBatch batch;
            batch.pattern_of.assign(b, idx - my_first_);
            batch.positions.assign(cand.begin() + static_cast<std::ptrdiff_t>(2 * k0),
                                   cand.begin() + static_cast<std::ptrdiff_t>(2 * (k0 + b)));
            const std::vector<double> inten = worker_->model_intensity(batch);
            const double inv_n = 1.0 / static_cast<double>(n);
            for (size_t k = 0; k < b; ++k) {
                const double* model = inten.data() + k * static_cast<size_t>(n);
                double loss = 0, f = 0;
                for (size_t q = 0; q < static_cast<size_t>(n); ++q)
                    loss += modulus_pixel(kind, model[q] + kIntensityFloor, static_cast<double>(data[q]), inv_n, f).a;
                if (k0 + k == 0 || loss < best) {
                    best = loss;
                    best_k = k0 + k;
                }
            }
        }
        ds_.positions[i] = cand[2 * best_k];
        ds_.positions[i + 1] = cand[2 * best_k + 1];
    }
    pos_m_[i] = pos_m_[i + 1] = pos_v_[i] = pos_v_[i + 1] = 0;
    pos_moved_[i] += 1;
}

/// Gathers every rank's positions (and their Adam moments) so that all ranks agree.
void Reconstruction::sync_positions() {
    if (ctx_.size() == 1 || !cfg_.correct_positions) return;
    PhaseTimer::Scope c(timer_, Phase::comm);
    std::vector<int> counts(static_cast<size_t>(ctx_.size())), displs(static_cast<size_t>(ctx_.size()));
    for (size_t r = 0; r < counts.size(); ++r) {
        const std::int64_t a = schedule_->stratum_begin(bounds_[r]), b = schedule_->stratum_begin(bounds_[r + 1]);
        displs[r] = static_cast<int>(2 * a);
        counts[r] = static_cast<int>(2 * (b - a));
    }
    for (std::vector<double>* v : {&ds_.positions, &pos_m_, &pos_v_, &pos_moved_}) {
        MPI_Request req = MPI_REQUEST_NULL;
        EF_MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, v->data(), counts.data(), displs.data(),
                                     MPI_DOUBLE, ctx_.world(), &req));
        heartbeat_->wait(req, "the exchange of corrected positions");
    }
}

/**
 * New shares proportional to each rank's measured speed: positions per second of gradient
 * work, accumulated since the last change of shares (timing noise averages out, and a share
 * is only moved when the predicted slowest rank gains more than 5%).
 */
void Reconstruction::rebalance() {
    std::vector<double> speed(static_cast<size_t>(ctx_.size()));
    const double secs = speed_seconds_total_ - speed_mark_seconds_;
    const double mine = secs > 0 ? static_cast<double>(positions_done_ - speed_mark_positions_) / secs : 0.0;
    {
        PhaseTimer::Scope c(timer_, Phase::sched);
        MPI_Request req = MPI_REQUEST_NULL;
        EF_MPI_CHECK(MPI_Iallgather(&mine, 1, MPI_DOUBLE, speed.data(), 1, MPI_DOUBLE, ctx_.world(), &req));
        heartbeat_->wait(req, "the exchange of rank speeds");
    }
    if (!debug_speeds_.empty()) speed = debug_speeds_[std::min(rebalance_points_, debug_speeds_.size() - 1)];
    ++rebalance_points_;
    const std::vector<std::int64_t> next = BatchSchedule::partition(schedule_->strata(), speed);
    auto slowest = [&](const std::vector<std::int64_t>& b) {
        double worst = 0;
        for (size_t r = 0; r + 1 < b.size(); ++r)
            worst = std::max(worst, speed[r] > 0 ? static_cast<double>(b[r + 1] - b[r]) / speed[r] : 0.0);
        return worst;
    };
    if (next == bounds_ || slowest(next) > 0.95 * slowest(bounds_)) return;
    sync_positions();
    speed_mark_seconds_ = speed_seconds_total_;
    speed_mark_positions_ = positions_done_;
    bounds_ = next;
    load_share(bounds_);
    ++rebalances_;
    if (!ctx_.is_root()) return;
    std::printf("  rebalanced shares (strata per rank):");
    for (size_t r = 0; r + 1 < bounds_.size(); ++r) std::printf(" %lld", static_cast<long long>(bounds_[r + 1] - bounds_[r]));
    std::printf("\n");
    std::fflush(stdout);
}

}  // namespace ef::recon
