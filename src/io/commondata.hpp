// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/io/data_table.hpp>

#include "src/io/correlated_data.hpp"

namespace ef {

/// How a commondata uncertainty source scales: ADD (absolute, fixed) or MULT (relative: it
/// scales with the prediction, through the t0 prescription of src/fit/correlated.hpp).
enum class CommondataTreatment { add, mult };

/**
 * One NNPDF "new commondata" data set (https://docs.nnpdf.science/data/new-commondata.html) as
 * its YAML files give it, all points, before cuts: metadata.yaml's implemented observable
 * whose central-value file is present, its kinematics (x, Q2: the `mid` of each bin) and its
 * uncertainty sources (`definitions` + `bins`). `values` is n x sources, row-major, absolute
 * (the files' convention, MULT included). `type` is UNCORR, CORR, or a name shared by sources
 * correlated across sets (BCDMSNORM, ...). Target 1 = proton (set name ending _P), 3 = deuteron
 * (_D: F2d = (F2p + F2n) / 2 per nucleon, dis-mellin's target 3).
 */
struct CommondataSet {
    std::string name;
    std::string folder;
    int target = 1;
    std::vector<double> x, q2, f2;
    std::vector<std::string> source, type;
    std::vector<CommondataTreatment> treatment;
    std::vector<double> values;
};

/**
 * Reads set `name` from `folder`/`name`/. Throws ef::Error naming the file, line and key: exit 3
 * for a malformed file (YAML syntax, a missing key or column, a value that is not a number, an
 * uncertainty list of the wrong length, a negative UNCORR uncertainty, an unknown treatment,
 * ndata that disagrees with a file's length); exit 2 for what the config asked that the reader
 * cannot do (no such set, a name without _P or _D, a ratio observable such as NMC's F2d/F2p).
 */
CommondataSet read_commondata_set(const std::string& folder, const std::string& name);

/**
 * The fit's data from the sets of [data] sets, cut (FitConfig q2_min, w2_min, x_min, x_max),
 * in set order, onto the generic correlated data path: DataTable rows (x, Q2, target; F2;
 * sigma = the UNCORR sources in quadrature) and CorrelatedInputs (one systematic column per
 * CORR source of a set, zero on other sets' rows, and one per shared type name across sets;
 * MULT columns relative to the data's central value, to be scaled by the t0 prediction; the
 * dataset column = the set's index; dataset_names). Fills cfg.systematics and systematic_mult.
 * The data checksum covers every value. Exit 3 also for a cut that leaves no point of a set,
 * one type name that is ADD in one set and MULT in another, or one name twice in a set.
 */
void load_commondata(FitConfig& cfg, DataTable& data, CorrelatedInputs& in);

}  // namespace ef
