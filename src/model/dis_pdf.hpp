// SPDX-License-Identifier: MIT
#pragma once

#include <map>
#include <string>
#include <vector>

#include "src/model/dis_mellin.hpp"
#include "src/model/dis_nlo.hpp"

namespace ef {

/// The [model] options (without name) of a result file's canonical config: what
/// parse_dis_mellin_settings() takes to rebuild the fit's evolution.
std::map<std::string, std::string> dis_mellin_options_of(const std::string& canonical);

/// The [model] settings of a dis-mellin result file's stored config (`canonical`), checked
/// against the file's parameters (`param_names`, which its datasets follow, read_results): a
/// stored config whose parameter layout differs is a data_error (exit 3) naming `source`, before
/// any replica's values are read by that layout.
DisMellinSettings dis_mellin_settings_of(const std::string& source, const std::string& canonical,
                                         const std::vector<std::string>& param_names);

/// The distributions DisPdfEvaluator returns, in order: g, u, ubar, d, dbar, s (= sbar), c
/// (= cbar), b (= bbar), u_v, d_v and the light sea 2 (ubar + dbar + s).
const std::vector<std::string>& dis_pdf_names();

/**
 * x f(x, Q^2) of a dis-mellin parameter vector on a grid, by the same evolution as the fit's
 * tables (the qcd:: code at the settings' order; at LO it equals the original LO tables to
 * rounding). Everything parameter-independent (the evolved basis at every Q^2 and contour node,
 * x^-N and the weights) is computed once here; values() then costs Q^2 x names x x x nodes.
 * Throws ef::usage_error when a Q^2 lies below Q0^2 or x is outside (0, 1).
 */
class DisPdfEvaluator {
   public:
    DisPdfEvaluator(const DisMellinSettings& settings, std::vector<double> x, std::vector<double> q2);

    /// [q2][name][x] values for the parameters p of the settings' layout (17 by default).
    std::vector<double> values(const double* p) const;
    std::size_t size() const { return q2_.size() * dis_pdf_names().size() * x_.size(); }

   private:
    DisMellinSettings settings_;
    std::vector<double> x_, q2_;
    std::vector<qcd::Cx> nodes_;
    std::vector<qcd::Cx> kernel_;                ///< [x][node]: (x / pi) w_k e^{i phi} x^-N_k
    std::vector<qcd::PartonMoments> evolved_;    ///< [q2][node][basis]
};

}  // namespace ef
