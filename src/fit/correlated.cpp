// SPDX-License-Identifier: MIT
#include "src/fit/correlated.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <variant>

#include <ensemblefit/core/error.hpp>

#include "src/model/compiled_model.hpp"

namespace ef {
namespace {

/// The model at the start values, at every data point: the t0 prediction.
std::vector<double> t0_prediction(const FitProblem& pb) {
    std::vector<double> p;
    for (const auto& s : pb.config.params) p.push_back(s.start);
    const DataTable& d = pb.data;
    std::vector<double> f(static_cast<size_t>(d.n));
    std::visit(
        [&](const auto& m) {
            std::vector<double> ws(static_cast<size_t>(std::max(1, m.workspace_size())));
            m.prepare(p.data(), ws.data());
            for (int i = 0; i < d.n; ++i)
                f[static_cast<size_t>(i)] = m.value(p.data(), ws.data(), d.x.data() + static_cast<long>(i) * d.nx, i);
        },
        pb.model->view);
    for (int i = 0; i < d.n; ++i)
        if (!std::isfinite(f[static_cast<size_t>(i)]))
            throw usage_error(pb.config.config_file + ": the t0 prediction (the model at the start values, for "
                              "multiplicative uncertainties) is not finite at data row " + std::to_string(i + 1));
    return f;
}

/// Usage errors of correlated data: what the paths cannot do with it.
void check_correlated_config(const FitProblem& pb, bool table_linear, int K) {
    const FitConfig& cfg = pb.config;
    if (cfg.resample == ResampleMethod::bootstrap)
        throw usage_error(cfg.where("fit.resample") + ": resample = bootstrap with correlated uncertainties "
                          "([data] systematics, covariance or [normalisation.NAME]); use smear");
    if (!table_linear && cfg.solver == FitSolver::normal)
        throw usage_error(cfg.where("fit.solver") + ": solver = normal accumulates point by point and cannot "
                          "whiten correlated data for model '" + cfg.model_name + "'; use solver = qr");
    if (cfg.covariance.empty() && K > kMaxCorrelatedSources)
        throw usage_error(cfg.where("data.systematics") + ": " + std::to_string(K) + " correlated sources; at "
                          "most " + std::to_string(kMaxCorrelatedSources) + " (or give a full [data] covariance)");
}

/// A copy of the dis-mellin model whose table is L^-1 T (the storage keeps the original alive).
std::shared_ptr<const CompiledModel> whitened_table_model(const CompiledModel& cm, const WhitenView& w, int threads) {
    struct Storage {
        std::shared_ptr<const void> original;
        std::vector<double> table;
    };
    auto st = std::make_shared<Storage>();
    st->original = cm.storage;
    auto out = std::make_shared<CompiledModel>(cm);
    auto& m = std::get<DisMellinModel>(out->view);
    const long Kt = m.table_width();
    st->table.assign(m.table, m.table + static_cast<long>(m.points) * Kt);
    whiten_columns(w, st->table.data(), Kt, threads);
    m.table = st->table.data();
    out->storage = st;
    return out;
}

}  // namespace

std::vector<double> correlated_shifts(const FitConfig& cfg, const CorrelatedInputs& in, const std::vector<double>& t0) {
    const int n = in.n, S = in.S;
    const int K = S + static_cast<int>(cfg.normalisations.size());
    std::vector<double> B(static_cast<size_t>(n) * static_cast<size_t>(K), 0.0);
    for (int i = 0; i < n; ++i) {
        const size_t row = static_cast<size_t>(i) * static_cast<size_t>(K);
        for (int k = 0; k < S; ++k) {
            const double s = in.syst[static_cast<size_t>(i) * static_cast<size_t>(S) + static_cast<size_t>(k)];
            B[row + static_cast<size_t>(k)] = cfg.systematic_mult[static_cast<size_t>(k)] ? s * t0[static_cast<size_t>(i)] : s;
        }
        for (size_t q = 0; q < cfg.normalisations.size(); ++q) {
            const double id = std::strtod(cfg.normalisations[q].first.c_str(), nullptr);
            if (in.dataset[static_cast<size_t>(i)] == id)
                B[row + static_cast<size_t>(S) + q] = cfg.normalisations[q].second * t0[static_cast<size_t>(i)];
        }
    }
    return B;
}

Whitening structured_whitening(const std::vector<double>& sigma, const std::vector<double>& B, int K) {
    const int n = static_cast<int>(sigma.size());
    Whitening w;
    w.inv_sigma.resize(static_cast<size_t>(n));
    w.a.resize(static_cast<size_t>(n) * static_cast<size_t>(K));
    w.v.resize(w.a.size());
    w.d.resize(static_cast<size_t>(n));
    std::vector<double> S(static_cast<size_t>(K) * static_cast<size_t>(K), 0.0), Sa(static_cast<size_t>(K));
    for (int k = 0; k < K; ++k) S[static_cast<size_t>(k) * static_cast<size_t>(K) + static_cast<size_t>(k)] = 1.0;
    for (int j = 0; j < n; ++j) {
        const size_t row = static_cast<size_t>(j) * static_cast<size_t>(K);
        w.inv_sigma[static_cast<size_t>(j)] = 1.0 / sigma[static_cast<size_t>(j)];
        for (int k = 0; k < K; ++k) w.a[row + static_cast<size_t>(k)] = B[row + static_cast<size_t>(k)] / sigma[static_cast<size_t>(j)];
        const double* a = w.a.data() + row;
        double d2 = 1.0;
        for (int k = 0; k < K; ++k) {
            double s = 0.0;
            for (int l = 0; l < K; ++l) s += S[static_cast<size_t>(k) * static_cast<size_t>(K) + static_cast<size_t>(l)] * a[l];
            Sa[static_cast<size_t>(k)] = s;
            d2 += a[k] * s;
        }
        const double d = std::sqrt(d2);
        w.d[static_cast<size_t>(j)] = d;
        for (int k = 0; k < K; ++k) w.v[row + static_cast<size_t>(k)] = Sa[static_cast<size_t>(k)] / d;
        const double* v = w.v.data() + row;
        for (int k = 0; k < K; ++k)
            for (int l = 0; l < K; ++l) S[static_cast<size_t>(k) * static_cast<size_t>(K) + static_cast<size_t>(l)] -= v[k] * v[l];
    }
    w.view = WhitenView{n, K, w.inv_sigma.data(), w.a.data(), w.v.data(), w.d.data(), nullptr};
    return w;
}

Whitening dense_whitening(const std::vector<double>& C, int n, const std::string& what) {
    Whitening w;
    w.dense.assign(static_cast<size_t>(n) * static_cast<size_t>(n), 0.0);
    double* L = w.dense.data();
    for (int i = 0; i < n; ++i) {
        double* Li = L + static_cast<long>(i) * n;
        for (int j = 0; j <= i; ++j) {
            const double* Lj = L + static_cast<long>(j) * n;
            double s = C[static_cast<size_t>(i) * static_cast<size_t>(n) + static_cast<size_t>(j)];
            for (int k = 0; k < j; ++k) s -= Li[k] * Lj[k];
            if (j < i) {
                Li[j] = s / Lj[j];
            } else if (!(s > 0.0) || !std::isfinite(s)) {
                char v[64];
                std::snprintf(v, sizeof v, "%.6g", s);
                throw data_error(what + ": the covariance is not positive definite: Cholesky pivot " +
                                 std::to_string(i + 1) + " (data row " + std::to_string(i + 1) + ") is " + v);
            } else {
                Li[i] = std::sqrt(s);
            }
        }
    }
    w.view = WhitenView{};
    w.view.n = n;
    w.view.dense = L;
    return w;
}

void whiten_columns(const WhitenView& w, double* T, long cols, int threads) {
    constexpr long kBlock = 16;
    const int n = w.n;
    const int K = w.K;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long c0 = 0; c0 < cols; c0 += kBlock) {
        const long m = std::min(kBlock, cols - c0);
        std::vector<double> h(static_cast<size_t>(K) * kBlock, 0.0);
        for (int j = 0; j < n; ++j) {
            double* Tj = T + static_cast<long>(j) * cols + c0;
            for (long c = 0; c < m; ++c) {
                if (w.dense != nullptr) {
                    const double* row = w.dense + static_cast<long>(j) * n;
                    double s = Tj[c];
                    for (int k = 0; k < j; ++k) s -= row[k] * T[static_cast<long>(k) * cols + c0 + c];
                    Tj[c] = s / row[j];
                    continue;
                }
                const double* aj = w.a + static_cast<long>(j) * K;
                const double* vj = w.v + static_cast<long>(j) * K;
                double s = Tj[c] * w.inv_sigma[j];
                for (int k = 0; k < K; ++k) s -= aj[k] * h[static_cast<size_t>(k * kBlock + c)];
                const double z = s / w.d[j];
                for (int k = 0; k < K; ++k) h[static_cast<size_t>(k * kBlock + c)] += vj[k] * z;
                Tj[c] = z;
            }
        }
    }
}

double whitened_chi2(const WhitenView& w, std::vector<double> r) {
    whiten_in_place(w, r.data());
    double s = 0.0;
    for (double z : r) s += z * z;
    return s;
}

CorrelatedFactor whiten_problem(FitProblem& pb, const CorrelatedInputs& in, int threads) {
    const FitConfig& cfg = pb.config;
    if (!cfg.correlated()) return {};
    const bool table_linear = std::holds_alternative<DisMellinModel>(pb.model->view);
    const int K = in.S + static_cast<int>(cfg.normalisations.size());
    check_correlated_config(pb, table_linear, K);
    std::vector<double> B = correlated_shifts(cfg, in, t0_prediction(pb));
    auto w = std::make_shared<Whitening>();
    if (cfg.covariance.empty()) {
        *w = structured_whitening(pb.data.sigma, B, K);
    } else {
        std::vector<double> C = in.covariance;
        const size_t n = static_cast<size_t>(in.n);
        for (size_t i = 0; i < n; ++i)
            for (size_t j = 0; j < n; ++j)
                for (size_t k = 0; k < static_cast<size_t>(K); ++k) C[i * n + j] += B[i * static_cast<size_t>(K) + k] * B[j * static_cast<size_t>(K) + k];
        *w = dense_whitening(C, in.n, cfg.where("data.covariance") + " = " + cfg.covariance);
    }
    whiten_in_place(w->view, pb.data.y.data());
    std::fill(pb.data.sigma.begin(), pb.data.sigma.end(), 1.0);
    if (table_linear) pb.model = whitened_table_model(*pb.model, w->view, threads);
    else pb.whitening = w;
    return CorrelatedFactor{std::move(B), K, std::move(w)};
}

}  // namespace ef
