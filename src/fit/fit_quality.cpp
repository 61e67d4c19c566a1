// SPDX-License-Identifier: MIT
#include "src/fit/fit_quality.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "src/fit/prediction.hpp"

namespace ef {
namespace {

/// r = L z: the inverse of whiten_in_place() (kernels/fit/whiten.hpp), in the same order.
void unwhiten_in_place(const WhitenView& w, double* z) {
    const int n = w.n;
    if (w.dense != nullptr) {
        for (int j = n - 1; j >= 0; --j) {
            const double* row = w.dense + static_cast<long>(j) * n;
            double s = 0.0;
            for (int k = 0; k <= j; ++k) s += row[k] * z[k];
            z[j] = s;
        }
        return;
    }
    const int K = w.K;
    std::vector<double> h(static_cast<std::size_t>(K), 0.0);
    for (int j = 0; j < n; ++j) {
        const double* aj = w.a + static_cast<long>(j) * K;
        const double* vj = w.v + static_cast<long>(j) * K;
        const double zj = z[j];
        double s = zj * w.d[j];
        for (int k = 0; k < K; ++k) s += aj[k] * h[static_cast<std::size_t>(k)];
        for (int k = 0; k < K; ++k) h[static_cast<std::size_t>(k)] += vj[k] * zj;
        z[j] = s / w.inv_sigma[j];
    }
}

std::string dataset_name(double id, const std::vector<std::string>& names) {
    const double r = std::round(id);
    if (r == id && r >= 0 && r < static_cast<double>(names.size()) && !names[static_cast<std::size_t>(r)].empty())
        return names[static_cast<std::size_t>(r)];
    char b[48];
    std::snprintf(b, sizeof b, "dataset %.10g", id);
    return b;
}

/// L^-1 (y - t) for `count` parameter vectors: the residuals as the fit weighs them.
std::vector<double> whitened_residuals(const FitProblem& pb, const FitQualityInputs& in, const double* params,
                                       std::size_t count, int threads) {
    const std::size_t n = static_cast<std::size_t>(pb.data.n);
    std::vector<double> z(count * n);
    evaluate_model(pb, params, count, threads, z.data());
    const Whitening* w = in.factor.whitening.get();
    for (std::size_t r = 0; r < count; ++r) {
        double* zr = z.data() + r * n;
        if (w != nullptr && !in.model_whitened) whiten_in_place(w->view, zr);
        for (std::size_t i = 0; i < n; ++i) {
            // pb.data: whitened y and sigma = 1 for correlated data, as given otherwise
            zr[i] = (pb.data.y[i] - zr[i]) / pb.data.sigma[i];
        }
    }
    return z;
}

/// r_d^T C_dd^-1 r_d over the rows `rows`: C_dd from the covariance file or sigma, plus B_d B_d^T.
double block_chi2(const FitQualityInputs& in, const std::vector<double>& r, const std::vector<std::size_t>& rows) {
    const std::size_t m = rows.size();
    const int K = in.factor.K;
    const std::size_t Ku = static_cast<std::size_t>(K);
    std::vector<double> rd(m);
    for (std::size_t a = 0; a < m; ++a) rd[a] = r[rows[a]];
    if (in.factor.whitening == nullptr) {
        double s = 0.0;
        for (std::size_t a = 0; a < m; ++a) s += (rd[a] / in.sigma[rows[a]]) * (rd[a] / in.sigma[rows[a]]);
        return s;
    }
    std::vector<double> Bd(m * Ku);
    for (std::size_t a = 0; a < m; ++a)
        for (std::size_t k = 0; k < Ku; ++k) Bd[a * Ku + k] = in.factor.B[rows[a] * Ku + k];
    Whitening w;
    if (in.covariance.empty()) {
        std::vector<double> sd(m);
        for (std::size_t a = 0; a < m; ++a) sd[a] = in.sigma[rows[a]];
        w = structured_whitening(sd, Bd, K);
    } else {
        const std::size_t n = in.sigma.size();
        std::vector<double> C(m * m);
        for (std::size_t a = 0; a < m; ++a)
            for (std::size_t b = 0; b < m; ++b) {
                double c = in.covariance[rows[a] * n + rows[b]];
                for (std::size_t k = 0; k < Ku; ++k) c += Bd[a * Ku + k] * Bd[b * Ku + k];
                C[a * m + b] = c;
            }
        w = dense_whitening(C, static_cast<int>(m), "a data set's covariance block");
    }
    return whitened_chi2(w.view, rd);
}

/// The central fit's part: chi2 in total and per data set, the sources' shifts, errors and pulls.
void central_quality(const FitProblem& pb, const FitQualityInputs& in, const std::vector<double>& central,
                     int threads, FitQuality& q) {
    const std::size_t n = static_cast<std::size_t>(pb.data.n);
    q.n = pb.data.n;
    const std::vector<double> z = whitened_residuals(pb, in, central.data(), 1, threads);
    for (double v : z) q.chi2 += v * v;

    // the residual as given: r = L z (sigma z without correlations)
    std::vector<double> r = z;
    if (in.factor.whitening) unwhiten_in_place(in.factor.whitening->view, r.data());
    else
        for (std::size_t i = 0; i < n; ++i) r[i] *= in.sigma[i];

    if (!in.dataset.empty()) {
        std::map<double, std::vector<std::size_t>> sets;
        for (std::size_t i = 0; i < n; ++i) sets[in.dataset[i]].push_back(i);
        for (const auto& [id, members] : sets) {
            q.dataset_names.push_back(dataset_name(id, in.dataset_names));
            q.dataset_n.push_back(static_cast<std::int64_t>(members.size()));
            q.dataset_chi2.push_back(block_chi2(in, r, members));
        }
    }

    const int K = in.factor.K;
    if (K > 0 && in.factor.whitening) {
        const std::size_t Ku = static_cast<std::size_t>(K);
        std::vector<double> W = in.factor.B;  // n x K
        whiten_columns(in.factor.whitening->view, W.data(), K, threads);
        q.source_names = in.source_names;
        q.source_names.resize(Ku);
        for (std::size_t k = 0; k < Ku; ++k) {
            double lambda = 0.0, wtw = 0.0;
            for (std::size_t i = 0; i < n; ++i) {
                lambda += W[i * Ku + k] * z[i];
                wtw += W[i * Ku + k] * W[i * Ku + k];
            }
            q.shift.push_back(lambda);
            q.shift_error.push_back(std::sqrt(std::max(0.0, 1.0 - wtw)));
            q.pull.push_back(wtw > 0.0 ? lambda / std::sqrt(wtw) : std::numeric_limits<double>::quiet_NaN());
        }
    }
}

/// Each replica's chi2 against the central data (NaN unless status 0 or 1): a function of its
/// parameters and the data alone, whichever run computes it.
void replica_quality(const FitProblem& pb, const FitQualityInputs& in, const ReplicaBlock& rows, std::int64_t first,
                     int threads, FitQuality& q) {
    const std::size_t n = static_cast<std::size_t>(pb.data.n);
    const std::size_t P = static_cast<std::size_t>(pb.num_params());
    // each replica against the central data, in batches (bounded memory: batch x n values)
    const std::size_t R = rows.status.size();
    for (std::size_t j = 0; j < R; ++j) q.replica_index.push_back(first + static_cast<std::int64_t>(j));
    q.replica_chi2.assign(R, std::numeric_limits<double>::quiet_NaN());
    constexpr std::size_t kBatch = 256;
    std::vector<std::size_t> done;
    std::vector<double> params;
    for (std::size_t r0 = 0; r0 < R; r0 += kBatch) {
        done.clear();
        params.clear();
        for (std::size_t j = r0; j < std::min(R, r0 + kBatch); ++j) {
            if (rows.status[j] != 0 && rows.status[j] != 1) continue;
            done.push_back(j);
            params.insert(params.end(), rows.params.begin() + static_cast<long>(j * P),
                          rows.params.begin() + static_cast<long>((j + 1) * P));
        }
        if (done.empty()) continue;
        const std::vector<double> zr = whitened_residuals(pb, in, params.data(), done.size(), threads);
        for (std::size_t b = 0; b < done.size(); ++b) {
            double s = 0.0;
            for (std::size_t i = 0; i < n; ++i) s += zr[b * n + i] * zr[b * n + i];
            q.replica_chi2[done[b]] = s;
        }
    }
}

}  // namespace

FitQualityInputs quality_inputs(const FitProblem& pb, const CorrelatedInputs& in) {
    FitQualityInputs q;
    q.sigma = pb.data.sigma;
    q.covariance = in.covariance;
    q.dataset = in.dataset;
    q.dataset_names = in.dataset_names;
    const FitConfig& cfg = pb.config;
    for (std::size_t k = 0; k < cfg.systematics.size(); ++k) q.source_names.push_back(cfg.systematics[k]);
    for (const auto& nm : cfg.normalisations) q.source_names.push_back("normalisation." + nm.first);
    return q;
}

FitQuality fit_quality(const FitProblem& pb, const FitQualityInputs& in, const std::vector<double>& central,
                       const ReplicaBlock& rows, std::int64_t first, int threads) {
    FitQuality q;
    if (!central.empty()) central_quality(pb, in, central, threads, q);
    replica_quality(pb, in, rows, first, threads, q);
    return q;
}

}  // namespace ef
