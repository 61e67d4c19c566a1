// SPDX-License-Identifier: MIT
#include "src/model/dis_pdf.hpp"

#include <cmath>
#include <cstddef>
#include <sstream>

#include <ensemblefit/core/error.hpp>

#include "kernels/models/dis_mellin.hpp"

namespace ef {

namespace {

constexpr double kPi = 3.14159265358979323846;

/// The named distributions' moments from the evolved flavour moments (order of dis_pdf_names).
void named_moments(const qcd::PartonMoments& q, qcd::Cx* out) {
    const qcd::Cx u = 0.5 * (q.qp[0] + q.qm[0]), ubar = 0.5 * (q.qp[0] - q.qm[0]);
    const qcd::Cx d = 0.5 * (q.qp[1] + q.qm[1]), dbar = 0.5 * (q.qp[1] - q.qm[1]);
    const qcd::Cx s = 0.5 * q.qp[2];
    out[0] = q.g;
    out[1] = u;
    out[2] = ubar;
    out[3] = d;
    out[4] = dbar;
    out[5] = s;
    out[6] = 0.5 * q.qp[3];
    out[7] = 0.5 * q.qp[4];
    out[8] = q.qm[0];
    out[9] = q.qm[1];
    out[10] = 2.0 * (ubar + dbar + s);
}

}  // namespace

std::map<std::string, std::string> dis_mellin_options_of(const std::string& canonical) {
    std::map<std::string, std::string> out;
    std::stringstream ss(canonical);
    std::string section;
    for (std::string line; std::getline(ss, line);) {
        if (!line.empty() && line[0] == '[') {
            section = line;
            continue;
        }
        const std::size_t eq = line.find(" = ");
        if (section == "[model]" && eq != std::string::npos && line.substr(0, eq) != "name")
            out[line.substr(0, eq)] = line.substr(eq + 3);
    }
    return out;
}

DisMellinSettings dis_mellin_settings_of(const std::string& source, const std::string& canonical,
                                         const std::vector<std::string>& param_names) {
    const DisMellinSettings s = parse_dis_mellin_settings(dis_mellin_options_of(canonical));
    const std::vector<std::string> layout = dis_mellin_param_names(s);
    if (layout != param_names)
        throw data_error(source + ": its stored config (attribute canonical_config) has " +
                         std::to_string(layout.size()) + " dis-mellin parameters, its datasets (/replicas/params, "
                         "attribute param_names) " + std::to_string(param_names.size()) +
                         (layout.size() == param_names.size() ? ", named differently" : "") +
                         "; the file is not one ensemblefit wrote");
    return s;
}

const std::vector<std::string>& dis_pdf_names() {
    static const std::vector<std::string> names = {"g", "u", "ubar", "d", "dbar", "s",
                                                   "c", "b", "u_v", "d_v", "sea"};
    return names;
}

DisPdfEvaluator::DisPdfEvaluator(const DisMellinSettings& settings, std::vector<double> x,
                                 std::vector<double> q2)
    : settings_(settings), x_(std::move(x)), q2_(std::move(q2)) {
    for (double v : x_)
        if (!(v > 0.0 && v < 1.0)) throw usage_error("pdf: x = " + std::to_string(v) + " must lie in (0, 1)");
    for (double v : q2_)
        if (!(v >= settings_.q0_sq() * (1.0 - 1e-12) && std::isfinite(v)))  // Q0 = sqrt(2)^2 > 2
            throw usage_error("pdf: Q2 = " + std::to_string(v) + " is below Q0^2 = " +
                              std::to_string(settings_.q0_sq()) + " GeV^2 (the fit's input scale)");
    const MellinContour contour = settings_.contour();
    const qcd::Cx phase(contour.phase.re, contour.phase.im);
    for (const auto& n : contour.nodes) nodes_.emplace_back(n.re, n.im);
    const std::size_t nn = nodes_.size();
    kernel_.resize(x_.size() * nn);
    for (std::size_t i = 0; i < x_.size(); ++i)
        for (std::size_t k = 0; k < nn; ++k)
            kernel_[i * nn + k] = (x_[i] / kPi * contour.weights[k]) * phase * std::exp(-nodes_[k] * std::log(x_[i]));
    const qcd::QcdSettings qs = settings_.qcd();
    const int nb = settings_.layout().basis();
    const auto unit = dis_qcd_basis(settings_);
    evolved_.resize(q2_.size() * nn * static_cast<std::size_t>(nb));
    std::vector<std::vector<qcd::PathSegment>> paths;
    for (double v : q2_) paths.push_back(qcd::evolution_path(settings_.q0_sq(), v, qs));
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 4)
#endif
    for (std::ptrdiff_t k = 0; k < static_cast<std::ptrdiff_t>(nn); ++k) {
        const qcd::NodeEvolution evo(nodes_[static_cast<std::size_t>(k)], qs);
        for (std::size_t j = 0; j < q2_.size(); ++j) {
            qcd::PartonMoments* q = evolved_.data() + (j * nn + static_cast<std::size_t>(k)) * static_cast<std::size_t>(nb);
            for (int b = 0; b < nb; ++b) q[b] = unit[static_cast<std::size_t>(b)];
            evo.evolve(paths[j], q, nb);
        }
    }
}

std::vector<double> DisPdfEvaluator::values(const double* p) const {
    using namespace dis_mellin;
    const std::size_t nn = nodes_.size();
    const std::size_t names = dis_pdf_names().size();
    // the basis moments at Q0^2 on the contour, as in the model's prepare()
    const Layout lay = settings_.layout();
    const std::size_t nb = static_cast<std::size_t>(lay.basis());
    const Normalisation<double> nrm = normalisation(p, lay);
    std::vector<qcd::Cx> basis(nn * nb);
    for (std::size_t k = 0; k < nn; ++k) {
        Complex<double> q[kMaxBasis];
        input_moments(p, nrm, Complex<double>(nodes_[k].real(), nodes_[k].imag()), q, lay);
        for (std::size_t b = 0; b < nb; ++b) basis[k * nb + b] = qcd::Cx(q[b].re, q[b].im);
    }
    std::vector<double> out(size(), 0.0);
    std::vector<qcd::Cx> moments(names * nn);
    for (std::size_t j = 0; j < q2_.size(); ++j) {
        for (std::size_t k = 0; k < nn; ++k) {
            qcd::PartonMoments sum{};
            for (std::size_t b = 0; b < nb; ++b) {
                const qcd::PartonMoments& e = evolved_[(j * nn + k) * nb + b];
                const qcd::Cx w = basis[k * nb + b];
                for (int f = 0; f < qcd::kFlavours; ++f) {
                    sum.qp[f] += w * e.qp[f];
                    sum.qm[f] += w * e.qm[f];
                }
                sum.g += w * e.g;
            }
            qcd::Cx named[11];
            named_moments(sum, named);
            for (std::size_t n = 0; n < names; ++n) moments[n * nn + k] = named[n];
        }
        for (std::size_t n = 0; n < names; ++n)
            for (std::size_t i = 0; i < x_.size(); ++i) {
                double acc = 0.0;
                for (std::size_t k = 0; k < nn; ++k) acc += (kernel_[i * nn + k] * moments[n * nn + k]).imag();
                out[(j * names + n) * x_.size() + i] = acc;
            }
    }
    return out;
}

}  // namespace ef
