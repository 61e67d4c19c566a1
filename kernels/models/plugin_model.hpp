// SPDX-License-Identifier: MIT
#pragma once

#include <ensemblefit/model/model_plugin.hpp>

namespace ef {

/**
 * A model from a plugin library (include/ensemblefit/model/model_plugin.hpp) as an alternative of
 * ModelVariant: a view of the loaded table, whose entry points run the fit paths compiled in the
 * plugin. Host only: workers call its entry points instead of instantiating their templates on
 * it, and value() (predictions) goes through the plugin's values entry, point by point.
 */
struct PluginModel {
    const EfModelPlugin* table = nullptr;

    int num_params() const { return table->num_params; }
    int workspace_size() const { return 0; }
    void prepare(const double* /*p*/, double* /*ws*/) const {}
    /// One value; the plugin prepares and evaluates (the model's x row starts at x).
    double value(const double* p, const double* /*ws*/, const double* x, int /*i*/) const {
        double v = 0.0;
        table->values(p, x, 0, 1, &v);
        return v;
    }
};

}  // namespace ef
