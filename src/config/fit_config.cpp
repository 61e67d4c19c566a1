// SPDX-License-Identifier: MIT
#include <ensemblefit/config/fit_config.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <set>
#include <sstream>

#include <boost/program_options.hpp>

#include <ensemblefit/core/error.hpp>

#include "src/config/capacity.hpp"
#include "src/config/ini_scan.hpp"
#include "src/core/text.hpp"
#include "src/model/dis_mellin.hpp"

namespace po = boost::program_options;

namespace ef {
namespace {

using ini::KeyInfo;

/// The fixed keys: name, default (empty = none), help. `[param.NAME]` keys are added per name.
const KeyInfo kKeys[] = {
    {"data.file", "", "data file: CSV with a header row, or HDF5 with one 1-D dataset per column "
                      "(relative paths are taken from the config file's folder); required unless data.commondata"},
    {"data.x", "x", "independent variable column(s), comma-separated for several"},
    {"data.y", "y", "dependent variable column"},
    {"data.sigma", "", "uncertainty: a column name or a positive constant; required with data.file"},
    {"data.systematics", "", "correlated systematic shift columns, comma-separated: NAME (absolute, "
                             "additive) or NAME:mult (relative to the t0 prediction, the start point's)"},
    {"data.dataset", "", "column of dataset numbers, for [normalisation.NAME] sections"},
    {"data.covariance", "", "FILE.h5:/path: the full n x n covariance of y (replaces sigma^2; "
                            "systematics and normalisations are added to it)"},
    {"data.commondata", "", "folder of NNPDF \"new commondata\" sets (YAML), read instead of data.file "
                            "(relative to the config file's folder; docs/models.md, \"Real DIS data\")"},
    {"data.sets", "", "the commondata sets to fit, comma-separated folder names (target from the name: "
                      "_P proton, _D deuteron)"},
    {"data.q2_min", "3.49", "commondata cut: keep points with Q^2 > q2_min [GeV^2]"},
    {"data.w2_min", "12.5", "commondata cut: keep points with W^2 = Q^2 (1 - x) / x > w2_min [GeV^2] "
                            "(NNPDF's W^2, without the proton mass term)"},
    {"data.x_min", "0", "commondata cut: keep points with x >= x_min"},
    {"data.x_max", "1", "commondata cut: keep points with x <= x_max"},
    {"model.name", "", "formula | linear | polynomial | exponential | gaussian | gaussian2d | dis-mellin "
                       "(or `plugin = lib.so`: a model plugin built with ensemblefit_add_model); one of the two required"},
    {"model.formula", "", "the model for name = formula, over parameter and x column names; required there"},
    {"model.order", "1", "polynomial order (name = polynomial); LO | NLO (name = dis-mellin)"},
    {"model.peaks", "1", "number of Gaussian peaks (name = gaussian)"},
    {"model.compile", "auto", "auto | jit | interpret: a formula compiled to machine code at start (jit), "
                              "interpreted, or compiled when a compiler works (auto); same results"},
    {"model.compile_timeout", "600", "seconds a formula's compile may take: then the compiler is stopped, auto "
                                     "interprets and jit refuses (docs/security.md)"},
    {"fit.replicas", "0", "resampled replicas R >= 0, numbered 1..R (replica 0, the fit to the "
                          "data as given, is always done)"},
    {"fit.resample", "smear", "smear (y + sigma z) | bootstrap (points drawn with replacement)"},
    {"fit.seed", "1", "seed of the counter-based generator (replica r is a function of seed, r)"},
    {"fit.max_iterations", "1000", "Jacobian evaluations per replica before giving up"},
    {"fit.ftol", "1e-15", "stop when actual and predicted relative chi^2 reductions are below"},
    {"fit.xtol", "1e-10", "stop when the Gauss-Newton step, relative to the parameters (scaled), is below"},
    {"fit.gtol", "1e-12", "stop when the gradient's cosine with every column is below"},
    {"fit.precision", "double", "double | float (float: the normal-equations solver in single precision, "
                                "for many small fits; results are stored as double)"},
    {"fit.solver", "auto", "auto | qr | normal (auto: qr in double, normal in float, and normal (the Gram "
                           "path) for dis-mellin with smeared replicas and at most 16 free parameters; "
                           "normal accumulates J^T J point by point, needs at most 16 parameters and "
                           "squares the condition number)"},
    {"fit.error_scale", "none", "none | chi2: the central fit's covariance and errors as (J^T W J)^-1 from the "
                                "sigmas (none), or scaled by chi2/ndf, ndf = points - free parameters (chi2: "
                                "as NIST StRD, MINPACK and scipy's absolute_sigma=False); correlations are "
                                "the same either way"},
    {"fit.chunk", "0", "replicas per work unit (0 = automatic: 4 per thread, at most 1/8 of a rank's share)"},
    {"output.file", "", "HDF5 result file (relative to the current directory); required"},
    {"output.in_place", "auto", "auto | on | off: every rank writes its replica rows into the file itself "
                                "(on; rank 0 writes status and the rest), or rank 0 writes every row (off); "
                                "auto: on for runs of 2+ ranks and 1e6+ rows when every rank sees the "
                                "file (docs/parallel-output.md); the results are the same bits"},
    {"sched.policy", "dynamic", "static | dynamic | guided | weighted (work units in proportion to "
                                "each rank's measured throughput: for mixed CPU and GPU ranks)"},
    {"run.workers", "auto", "auto | cpu | gpu, or a comma-separated list per rank (the last repeats)"},
    {"run.threads", "0", "OpenMP threads per rank (0 = SLURM_CPUS_PER_TASK, else OMP_NUM_THREADS, "
                         "else the rank's cores, else cores / ranks on the node)"},
    {"run.bind", "auto", "auto | none | cores: auto gives each rank of a node its own block of cores "
                         "when the launcher bound none; cores always; none keeps the launcher's"},
    {"run.heartbeat_timeout", "300", "seconds a rank may stay silent while it holds work before rank 0 ends "
                                     "the run, naming it (results so far kept, --resume finishes them; 0 = never)"},
    {"tuning.gpu_lm_steps", "warp", "warp | thread: a GPU runs the batched LM steps (dis-mellin) with a warp "
                                    "per replica, or one thread per replica (slower; the same bits, which "
                                    "checks that the reductions do not depend on the backend)"},
    {"tuning.gpu_round_loop", "device", "device | host: a GPU runs the batched LM's rounds (dis-mellin) from "
                                        "the device (CUDA graphs of rounds, lists built on the GPU), or "
                                        "from the host, one round trip per round (slower; the same bits)"},
    {"lhapdf.set_index", "", "the set's LHAPDF ID (SetIndex in the .info) that `export lhapdf` writes, an integer "
                             "in 0..99999999 (none when not set; export lhapdf --set-index overrides it)"},
};

const KeyInfo kParamKeys[] = {
    {"start", "", "starting value (required)"},
    {"lower", "-inf", "lower bound (may be -inf)"},
    {"upper", "inf", "upper bound (may be inf)"},
    {"fixed", "false", "true to hold the parameter at its start value"},
};

const std::set<std::string> kSections = {"data", "model", "fit", "output", "sched", "run", "tuning", "lhapdf"};

/// [normalisation.NAME] sections: their one key.
const KeyInfo kNormKeys[] = {
    {"sigma", "", "relative normalisation uncertainty of dataset NAME (> 0; NAME is a value of [data] dataset)"},
};

bool is_param_subkey(const std::string& sub) { return ini::find_key(kParamKeys, sub) != nullptr; }

/// Splits "param.NAME.sub" into NAME and sub; false if it is not of that shape.
bool split_param_key(const std::string& key, std::string& name, std::string& sub) {
    if (key.rfind("param.", 0) != 0) return false;
    const auto last = key.rfind('.');
    if (last <= 6) return false;
    name = key.substr(6, last - 6);
    sub = key.substr(last + 1);
    return !name.empty() && !sub.empty();
}

/// The file's keys with their lines, its shape checked, and the [param.NAME] sections in file
/// order into `param_order` ([normalisation.NAME] into `norm_order`).
std::vector<ini::ScannedKey> scan_ini(const std::string& path, std::vector<std::string>& param_order,
                                      std::vector<std::string>& norm_order) {
    ini::Rules rules;
    rules.section = [&](const std::string& section, const std::string& at) {
        if (section.rfind("normalisation.", 0) == 0) {
            const std::string name = section.substr(14);
            if (name.empty() || name.find('.') != std::string::npos ||
                std::find(norm_order.begin(), norm_order.end(), name) != norm_order.end())
                throw usage_error(at + "malformed or repeated section [" + excerpt(section) + "]");
            norm_order.push_back(name);
        } else if (section.rfind("param.", 0) == 0) {
            const std::string name = section.substr(6);
            if (name.empty() || name.find('.') != std::string::npos)
                throw usage_error(at + "malformed parameter section [" + excerpt(section) + "]");
            if (std::find(param_order.begin(), param_order.end(), name) != param_order.end())
                throw usage_error(at + "parameter section [" + excerpt(section) + "] appears twice");
            param_order.push_back(name);
        } else if (!kSections.count(section)) {
            ini::unknown_section(at, section, "data, model, fit, output, sched, run, tuning, lhapdf, param.NAME, "
                                              "normalisation.NAME");
        }
    };
    rules.key = [](const std::string& section, const std::string& name, const std::string& at) {
        if (section.rfind("normalisation.", 0) == 0) {
            if (name != "sigma") ini::unknown_key(at, name, section, "sigma");
        } else if (section.rfind("param.", 0) == 0) {
            if (!is_param_subkey(name)) ini::unknown_key(at, name, section, "start, lower, upper, fixed");
        } else if (section == "model") {
            // Models with options of their own (dis-mellin) validate [model] keys themselves.
        } else if (!ini::find_key(kKeys, section + "." + name)) {
            ini::unknown_key(at, name, section, ini::allowed_keys_of(kKeys, section));
        }
    };
    return ini::scan(path, rules);
}

}  // namespace

std::string KeyOrigin::describe(const std::string& key) const {
    if (line > 0) return file + ":" + std::to_string(line) + ": " + key;
    if (!file.empty()) return file + ": " + key;
    return "--" + key;
}

std::string FitConfig::where(const std::string& key) const {
    const auto it = origins.find(key);
    if (it == origins.end()) return config_file + ": " + key;
    return it->second.describe(key);
}

std::vector<std::string> FitConfig::param_names() const {
    std::vector<std::string> names;
    for (const auto& p : params) names.push_back(p.name);
    return names;
}

namespace {

using ini::format_double;

std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
    return out;
}

}  // namespace

std::string FitConfig::canonical_text() const {
    std::ostringstream os;
    os << "[data]\n";
    // commondata: the sets and cuts as a comment (part of the identity; the data checksum covers
    // every value and treatment), then the fixed columns, so that predict and pdf read the text
    // back as any stored config (--data.file = their points) and resolved_text() runs again.
    if (!commondata.empty()) {
        std::string c = "# " + commondata_text();
        for (size_t at = c.find('\n'); at != std::string::npos; at = c.find('\n', at + 1)) c.insert(at + 1, "# ");
        os << c << "\n";
    }
    os << "x = " << join(x_columns) << "\ny = " << y_column << "\nsigma = " << sigma << "\n";
    // Written only when set, so that files from before these keys still match.
    if (!systematics.empty() && commondata.empty()) {
        std::vector<std::string> cols;
        for (size_t k = 0; k < systematics.size(); ++k)
            cols.push_back(systematics[k] + (systematic_mult[k] ? ":mult" : ""));
        os << "systematics = " << join(cols) << "\n";
    }
    if (!dataset_column.empty() && (commondata.empty() || !normalisations.empty()))
        os << "dataset = " << dataset_column << "\n";
    if (!covariance.empty()) os << "covariance = " << covariance << "\n";
    os << "[model]\nname = " << model_name << "\n";
    if (model_name == "formula") os << "formula = " << formula << "\n";
    if (model_name == "polynomial") os << "order = " << order << "\n";
    if (model_name == "gaussian") os << "peaks = " << peaks << "\n";
    for (const auto& [k, v] : model_options) os << k << " = " << v << "\n";
    for (const auto& p : params) {
        os << "[param." << p.name << "]\nstart = " << format_double(p.start)
           << "\nlower = " << format_double(p.lower) << "\nupper = " << format_double(p.upper)
           << "\nfixed = " << (p.fixed ? "true" : "false") << "\n";
    }
    os << "[fit]\nreplicas = " << replicas
       << "\nresample = " << (resample == ResampleMethod::smear ? "smear" : "bootstrap")
       << "\nseed = " << seed << "\nmax_iterations = " << max_iterations
       << "\nftol = " << format_double(ftol) << "\nxtol = " << format_double(xtol)
       << "\ngtol = " << format_double(gtol) << "\n";
    // Written only when not the default, so that files from before these keys still match.
    if (solver == FitSolver::normal) os << "solver = normal\n";
    if (precision == FitPrecision::float32) os << "precision = float\n";
    if (error_scale == ErrorScale::chi2) os << "error_scale = chi2\n";
    for (const auto& [name, sigma_n] : normalisations)
        os << "[normalisation." << name << "]\nsigma = " << format_double(sigma_n) << "\n";
    return os.str();
}

std::string FitConfig::commondata_text() const {
    return "sets = " + join(commondata_sets) + "\nq2_min = " + format_double(q2_min) + "\nw2_min = " +
           format_double(w2_min) + "\nx_min = " + format_double(x_min) + "\nx_max = " + format_double(x_max);
}

std::string FitConfig::resolved_text() const {
    std::ostringstream os;
    os << "# config file: " << config_file << "\n[data]\n"
       << (commondata.empty() ? "file = " + data_file : commondata_text() + "\ncommondata = " + data_file) << "\n"
       << canonical_text()
       // [fit] again: canonical_text() may end in [normalisation.NAME] sections, and a second
       // [fit] header is allowed (only a key set twice is refused), so the text runs as a config
       << "[fit]\nchunk = " << chunk << "\n[output]\nfile = " << output_file << "\nin_place = " << output_in_place
       << "\n[sched]\npolicy = " << sched_policy << "\n[run]\nworkers = " << run.workers_text() << "\nthreads = " << run.threads << "\nbind = " << run.bind
       << "\n[tuning]\ngpu_lm_steps = " << gpu_lm_steps
       << "\ngpu_round_loop = " << gpu_round_loop << "\n";
    if (lhapdf_set_index >= 0) os << "[lhapdf]\nset_index = " << lhapdf_set_index << "\n";
    return os.str();
}

namespace {

std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        item = trim(item);
        if (!item.empty()) out.push_back(item);
    }
    return out;
}

/// Parameters named only on the command line (--param.NAME.sub) are added after the file's.
void add_override_params(const std::vector<std::string>& overrides, std::vector<std::string>& param_order) {
    for (size_t i = 0; i < overrides.size(); ++i) {
        std::string key = overrides[i];
        if (key.rfind("--", 0) != 0) continue;
        key = key.substr(2, key.find('=') == std::string::npos ? std::string::npos : key.find('=') - 2);
        std::string name, sub;
        if (split_param_key(key, name, sub) &&
            std::find(param_order.begin(), param_order.end(), name) == param_order.end())
            param_order.push_back(name);
    }
}

/// Command line and file through Program_options: every value set, with where it came from in
/// cfg.origins (command line first: Program_options keeps the first value stored for a key);
/// keys the generic table does not know go to cfg.model_options when they belong to [model].
po::variables_map parse_values(const std::string& path, const std::vector<ini::ScannedKey>& scanned,
                               const std::vector<std::string>& overrides, const std::vector<std::string>& param_order,
                               const std::vector<std::string>& norm_order, FitConfig& cfg) {
    po::options_description desc;
    for (const auto& k : kKeys) desc.add_options()(k.key, po::value<std::string>(), k.help);
    for (const auto& name : norm_order)
        desc.add_options()(("normalisation." + name + ".sigma").c_str(), po::value<std::string>(), kNormKeys[0].help);
    for (const auto& name : param_order)
        for (const auto& k : kParamKeys)
            desc.add_options()(("param." + name + "." + k.key).c_str(), po::value<std::string>(), k.help);

    po::variables_map vm;
    try {
        const po::parsed_options cli = ini::parse_overrides(overrides, desc);  // no silent abbreviations
        for (const auto& o : cli.options) {
            if (!o.unregistered) continue;
            if (o.string_key.rfind("model.", 0) == 0) {
                if (o.value.size() != 1) throw usage_error("--" + o.string_key + ": expects one value");
                cfg.model_options[o.string_key.substr(6)] = o.value[0];
                cfg.origins[o.string_key] = KeyOrigin{"", 0};
                continue;
            }
            throw usage_error("unknown option '--" + excerpt(o.string_key) + "' (see ensemblefit fit --help)");
        }
        po::store(cli, vm);
        for (const auto& o : cli.options)
            if (!o.unregistered) cfg.origins[o.string_key] = KeyOrigin{"", 0};

        const po::parsed_options file = ini::as_parsed_options(scanned, desc);
        for (const auto& o : file.options) {
            // Only [model] may carry keys the generic table does not know (model options);
            // scan_ini refused any other.
            if (!o.unregistered || o.string_key.rfind("model.", 0) != 0) continue;
            const std::string sub = o.string_key.substr(6);
            if (!cfg.model_options.count(sub)) cfg.model_options[sub] = o.value.empty() ? "" : o.value[0];
        }
        po::store(file, vm);
    } catch (const po::error& e) {
        throw usage_error(path + ": " + excerpt(e.what(), 200));
    }
    return vm;
}

/// The values of one config, with defaults, and their conversions, whose errors name where the
/// key was set.
class Values {
   public:
    Values(const po::variables_map& vm, const FitConfig& cfg) : vm_(vm), c_(cfg) {}

    /// The value set for `key`, else its default ("" when it has none).
    std::string get(const std::string& key) const {
        if (vm_.count(key)) return vm_[key].as<std::string>();
        if (const KeyInfo* k = ini::find_key(kKeys, key)) return k->def;
        for (const auto& k : kParamKeys)
            if (key.size() > std::string(k.key).size() &&
                key.compare(key.size() - std::string(k.key).size(), std::string::npos, k.key) == 0)
                return k.def;
        return "";
    }
    /// The trimmed value; usage_error when it is empty.
    std::string required(const std::string& key) const {
        const std::string v = trim(get(key));
        if (v.empty()) throw usage_error(c_.config_file + ": missing required key '" + key + "'");
        return v;
    }
    double real(const std::string& key, const std::string& v) const { return ini::to_real(v, c_.where(key)); }
    /// An integer in lo..hi, read wide and checked before any narrowing.
    long long integer(const std::string& key, long long lo, long long hi) const {
        return ini::to_integer(get(key), c_.where(key), lo, hi);
    }
    bool boolean(const std::string& key, const std::string& v) const { return ini::to_bool(v, c_.where(key)); }

   private:
    const po::variables_map& vm_;
    const FitConfig& c_;
};

/// [data] commondata, sets and the cuts: the data's columns are then fixed (x, Q2, target; F2).
void read_commondata(FitConfig& cfg, const Values& v) {
    // The columns are fixed; a stored config (canonical_text) names them, with these values.
    const std::map<std::string, std::string> fixed = {
        {"data.x", "x,Q2,target"}, {"data.y", "F2"}, {"data.sigma", "uncorrelated"}, {"data.dataset", "dataset"}};
    for (const char* key : {"data.file", "data.x", "data.y", "data.sigma", "data.systematics", "data.dataset",
                            "data.covariance"}) {
        if (!cfg.origins.count(key)) continue;
        std::string value = v.get(key);
        value.erase(std::remove_if(value.begin(), value.end(), [](unsigned char c) { return std::isspace(c); }),
                    value.end());
        if (!fixed.count(key) || fixed.at(key) != value)
            throw usage_error(cfg.where(key) + ": not used with data.commondata (the commondata files give "
                              "the columns and uncertainties)");
    }
    cfg.commondata = trim(v.get("data.commondata"));
    if (cfg.commondata[0] != '/' && cfg.origins[("data.commondata")].line > 0)
        cfg.commondata = ini::folder_of(cfg.config_file) + cfg.commondata;
    cfg.commondata_sets = split_list(v.get("data.sets"));
    if (cfg.commondata_sets.empty())
        throw usage_error(cfg.where("data.sets") + ": no commondata set named (data.commondata is set)");
    for (size_t i = 0; i < cfg.commondata_sets.size(); ++i)
        if (std::find(cfg.commondata_sets.begin(), cfg.commondata_sets.begin() + static_cast<long>(i),
                      cfg.commondata_sets[i]) != cfg.commondata_sets.begin() + static_cast<long>(i))
            throw usage_error(cfg.where("data.sets") + ": set '" + excerpt(cfg.commondata_sets[i]) + "' named twice");
    cfg.q2_min = v.real("data.q2_min", v.get("data.q2_min"));
    cfg.w2_min = v.real("data.w2_min", v.get("data.w2_min"));
    cfg.x_min = v.real("data.x_min", v.get("data.x_min"));
    cfg.x_max = v.real("data.x_max", v.get("data.x_max"));
    for (const char* key : {"data.q2_min", "data.w2_min", "data.x_min", "data.x_max"})
        if (!std::isfinite(v.real(key, v.get(key))))
            throw usage_error(cfg.where(key) + ": must be a finite number");
    if (!(cfg.x_min < cfg.x_max))
        throw usage_error(cfg.where("data.x_max") + ": x_max must be above x_min (" + ini::format_double(cfg.x_min) + ")");
    cfg.data_file = cfg.commondata;
    cfg.x_columns = {"x", "Q2", "target"};
    cfg.y_column = "F2";
    cfg.sigma = "uncorrelated";
    cfg.dataset_column = "dataset";  // the set's number, 0-based in data.sets order: [normalisation.N]
}

void read_data(FitConfig& cfg, const Values& v) {
    if (!trim(v.get("data.commondata")).empty()) return read_commondata(cfg, v);
    for (const char* key : {"data.sets", "data.q2_min", "data.w2_min", "data.x_min", "data.x_max"})
        if (cfg.origins.count(key)) throw usage_error(cfg.where(key) + ": only with data.commondata");
    cfg.data_file = v.required("data.file");
    if (cfg.data_file[0] != '/' && cfg.origins[("data.file")].line > 0)
        cfg.data_file = ini::folder_of(cfg.config_file) + cfg.data_file;
    cfg.x_columns = split_list(v.get("data.x"));
    if (cfg.x_columns.empty()) throw usage_error(cfg.where("data.x") + ": no column named");
    cfg.y_column = trim(v.get("data.y"));
    cfg.sigma = v.required("data.sigma");
    char* end = nullptr;
    const double s = std::strtod(cfg.sigma.c_str(), &end);
    if (end == cfg.sigma.c_str() + cfg.sigma.size()) {
        cfg.sigma_is_constant = true;
        cfg.sigma_constant = s;
        if (!(s > 0.0) || !std::isfinite(s))
            throw usage_error(cfg.where("data.sigma") + ": a constant sigma must be positive and "
                                                        "finite, got '" + excerpt(cfg.sigma) + "'");
    }
}

/// [data] systematics, dataset, covariance and the [normalisation.NAME] sections.
void read_correlated(FitConfig& cfg, const Values& v, const std::vector<std::string>& norm_order) {
    for (const std::string& item : split_list(v.get("data.systematics"))) {
        const auto colon = item.find(':');
        const std::string name = trim(item.substr(0, colon));
        const std::string kind = colon == std::string::npos ? "" : trim(item.substr(colon + 1));
        if (name.empty() || (kind != "" && kind != "mult" && kind != "add"))
            throw usage_error(cfg.where("data.systematics") + ": '" + excerpt(item) +
                              "' is not NAME, NAME:add or NAME:mult");
        if (std::find(cfg.systematics.begin(), cfg.systematics.end(), name) != cfg.systematics.end())
            throw usage_error(cfg.where("data.systematics") + ": column '" + excerpt(name) + "' named twice");
        cfg.systematics.push_back(name);
        cfg.systematic_mult.push_back(kind == "mult" ? 1 : 0);
    }
    if (cfg.commondata.empty()) cfg.dataset_column = trim(v.get("data.dataset"));
    cfg.covariance = trim(v.get("data.covariance"));
    if (!cfg.covariance.empty()) {
        const auto colon = cfg.covariance.rfind(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == cfg.covariance.size())
            throw usage_error(cfg.where("data.covariance") + ": expected FILE.h5:/dataset, got '" +
                              excerpt(cfg.covariance) + "'");
        if (cfg.covariance[0] != '/' && cfg.origins[("data.covariance")].line > 0)
            cfg.covariance = ini::folder_of(cfg.config_file) + cfg.covariance;
    }
    for (const auto& name : norm_order) {
        const std::string key = "normalisation." + name + ".sigma";
        const double s = v.real(key, v.required(key));
        if (!(s > 0.0) || !std::isfinite(s))
            throw usage_error(cfg.where(key) + ": a normalisation uncertainty must be positive and finite, got '" +
                              excerpt(trim(v.get(key))) + "'");
        if (cfg.dataset_column.empty())
            throw usage_error(cfg.where(key) + ": [normalisation." + excerpt(name) +
                              "] needs [data] dataset (the column naming each row's dataset)");
        cfg.normalisations.emplace_back(name, s);
    }
}

void read_model(FitConfig& cfg, const Values& v) {
    // `[model] plugin = lib.so` (a model option, loaded by make_fit_problem) names the model itself.
    if (cfg.model_options.count("plugin")) {
        const std::string name = trim(v.get("model.name"));
        if (!name.empty() && name != "plugin")
            throw usage_error(cfg.where("model.name") + ": model.plugin is set, so name must be 'plugin' or absent, "
                              "got '" + excerpt(name) + "'");
        cfg.model_name = "plugin";
        if (cfg.model_options.size() > 1) {
            const auto other = std::find_if(cfg.model_options.begin(), cfg.model_options.end(),
                                            [](const auto& kv) { return kv.first != "plugin"; });
            throw usage_error(cfg.where("model." + other->first) + ": unknown key for a model plugin (allowed: plugin)");
        }
        return;
    }
    cfg.model_name = v.required("model.name");
    static const std::set<std::string> kModels = {"formula", "linear", "polynomial",
                                                  "exponential", "gaussian", "gaussian2d", "dis-mellin"};
    if (!kModels.count(cfg.model_name))
        throw usage_error(cfg.where("model.name") + ": unknown model '" + excerpt(cfg.model_name) +
                          "' (allowed: formula, linear, polynomial, exponential, gaussian, "
                          "gaussian2d, dis-mellin)");
    cfg.formula = trim(v.get("model.formula"));
    if (cfg.model_name == "formula" && cfg.formula.empty())
        throw usage_error(cfg.config_file + ": missing required key 'model.formula' (model.name = formula)");
    if (cfg.model_name == "dis-mellin") {
        // dis-mellin's order is the perturbative one (LO | NLO): one of its model options
        if (cfg.origins.count("model.order")) cfg.model_options["order"] = trim(v.get("model.order"));
    } else {
        cfg.order = static_cast<int>(v.integer("model.order", 0, 20));
    }
    cfg.peaks = static_cast<int>(v.integer("model.peaks", 1, 20));
    cfg.model_compile = trim(v.get("model.compile"));
    if (cfg.model_compile != "auto" && cfg.model_compile != "jit" && cfg.model_compile != "interpret")
        throw usage_error(cfg.where("model.compile") + ": unknown value '" + excerpt(cfg.model_compile) +
                          "' (allowed: auto, jit, interpret)");
    cfg.model_compile_timeout = v.real("model.compile_timeout", v.get("model.compile_timeout"));
    if (!(cfg.model_compile_timeout > 0.0) || !std::isfinite(cfg.model_compile_timeout))
        throw usage_error(cfg.where("model.compile_timeout") + ": must be a positive number of seconds, got '" +
                          excerpt(trim(v.get("model.compile_timeout"))) + "'");
    if (cfg.model_name != "dis-mellin" && !cfg.model_options.empty()) {
        const std::string key = "model." + cfg.model_options.begin()->first;
        throw usage_error(cfg.where(key) + ": unknown key for model '" + cfg.model_name +
                          "' (allowed: name, formula, order, peaks, compile, compile_timeout)");
    }
}

void read_params(FitConfig& cfg, const Values& v, const std::vector<std::string>& param_order) {
    for (const auto& name : param_order) {
        ParamSpec p;
        p.name = name;
        const std::string pre = "param." + name + ".";
        const std::string start = trim(v.get(pre + "start"));
        if (start.empty()) throw usage_error(cfg.config_file + ": [param." + name + "] has no 'start'");
        p.start = v.real(pre + "start", start);
        if (!std::isfinite(p.start))
            throw usage_error(cfg.where(pre + "start") + ": start must be finite");
        p.lower = v.real(pre + "lower", v.get(pre + "lower"));
        p.upper = v.real(pre + "upper", v.get(pre + "upper"));
        p.fixed = v.boolean(pre + "fixed", v.get(pre + "fixed"));
        if (p.lower > p.upper)
            throw usage_error(cfg.where(pre + "lower") + ": lower bound " + format_double(p.lower) +
                              " is above upper bound " + format_double(p.upper));
        if (p.start < p.lower || p.start > p.upper)
            throw usage_error(cfg.where(pre + "start") + ": start " + format_double(p.start) +
                              " is outside [" + format_double(p.lower) + ", " + format_double(p.upper) + "]");
        cfg.params.push_back(p);
    }
    if (cfg.params.empty()) throw usage_error(cfg.config_file + ": no [param.NAME] sections");
}

/// [fit] precision and solver: float needs the normal-equations solver.
void read_solver(FitConfig& cfg, const Values& v) {
    const std::string prec = trim(v.get("fit.precision"));
    if (prec == "float") cfg.precision = FitPrecision::float32;
    else if (prec != "double")
        throw usage_error(cfg.where("fit.precision") + ": unknown precision '" + excerpt(prec) +
                          "' (allowed: double, float)");
    const std::string solver = trim(v.get("fit.solver"));
    // dis-mellin: the Gram path where it applies (double, smeared replicas, <= 16 free
    // parameters): 3.2x the QR path's fits per CPU-second on stats2, parameters within 1.3e-5
    // of the fit errors (perf/dis.sh solver, perf/RESULTS.md); solver = qr keeps QR.
    const auto free = std::count_if(cfg.params.begin(), cfg.params.end(), [](const ParamSpec& p) { return !p.fixed; });
    const bool gram = cfg.model_name == "dis-mellin" && cfg.precision == FitPrecision::float64 &&
                      cfg.resample == ResampleMethod::smear && free <= 16;
    if (solver == "normal" || (solver == "auto" && (cfg.precision == FitPrecision::float32 || gram)))
        cfg.solver = FitSolver::normal;
    else if (solver == "qr" && cfg.precision == FitPrecision::float32)
        throw usage_error(cfg.where("fit.solver") + ": the QR solver runs in double only; precision = float "
                          "needs solver = normal (or auto)");
    else if (solver != "qr" && solver != "auto")
        throw usage_error(cfg.where("fit.solver") + ": unknown solver '" + excerpt(solver) +
                          "' (allowed: auto, qr, normal)");
}

/**
 * fit.replicas, against what one machine must hold: rank 0 keeps the list of pending replicas
 * and, for the summary (and a merge), every replica's row (index, parameters, chi2, status,
 * iterations) and a copy of the parameters: about 48 + 16 P bytes per replica. A run or shard
 * broadcasts the pending list in one MPI message, so at most INT_MAX - 1 replicas.
 */
long long read_replicas(const FitConfig& cfg, const Values& v) {
    constexpr long long kMax = std::numeric_limits<int>::max() - 1;
    const std::string text = trim(v.get("fit.replicas"));
    const long long r = v.integer("fit.replicas", std::numeric_limits<long long>::min(),
                                  std::numeric_limits<long long>::max());
    const double each = 48.0 + 16.0 * static_cast<double>(cfg.params.size());
    const double need = each * (static_cast<double>(r) + 1.0);
    if (r > 0 && exceeds_memory(need)) {
        const auto largest = std::min<long long>(kMax, static_cast<long long>(largest_count(each, each)));
        throw usage_error(cfg.where("fit.replicas") + " = " + excerpt(text) + " " +
                          memory_refusal(need, "/replicas and the summary (" + format_bytes(each) + " per replica)",
                                         std::to_string(largest) + " replicas"));
    }
    if (r < 0 || r > kMax)
        throw usage_error(cfg.where("fit.replicas") + ": must be in 0.." + std::to_string(kMax) + ", got " +
                          excerpt(text));
    return r;
}

void read_fit(FitConfig& cfg, const Values& v) {
    cfg.replicas = read_replicas(cfg, v);
    const std::string rs = trim(v.get("fit.resample"));
    if (rs == "smear") cfg.resample = ResampleMethod::smear;
    else if (rs == "bootstrap") cfg.resample = ResampleMethod::bootstrap;
    else throw usage_error(cfg.where("fit.resample") + ": unknown method '" + excerpt(rs) +
                           "' (allowed: smear, bootstrap)");
    cfg.seed = static_cast<std::uint64_t>(v.integer("fit.seed", 0, std::numeric_limits<long long>::max()));
    cfg.max_iterations = static_cast<int>(v.integer("fit.max_iterations", 1, std::numeric_limits<int>::max()));
    for (auto [key, dst] : {std::pair{"fit.ftol", &cfg.ftol}, std::pair{"fit.xtol", &cfg.xtol},
                            std::pair{"fit.gtol", &cfg.gtol}}) {
        *dst = v.real(key, v.get(key));
        if (!(*dst >= 0.0) || !std::isfinite(*dst))
            throw usage_error(cfg.where(key) + ": tolerance must be finite and >= 0");
    }
    read_solver(cfg, v);
    const std::string scale = trim(v.get("fit.error_scale"));
    if (scale == "chi2") cfg.error_scale = ErrorScale::chi2;
    else if (scale != "none")
        throw usage_error(cfg.where("fit.error_scale") + ": unknown error scale '" + excerpt(scale) +
                          "' (allowed: none, chi2)");
    cfg.chunk = static_cast<int>(v.integer("fit.chunk", 0, std::numeric_limits<int>::max()));
}

/// `key`'s value, trimmed, if it is one of `allowed`; else usage_error naming `what` and the
/// allowed values.
std::string choice(const FitConfig& cfg, const Values& v, const std::string& key, const char* what,
                   std::initializer_list<const char*> allowed) {
    const std::string value = trim(v.get(key));
    std::string list;
    for (const char* a : allowed) {
        if (value == a) return value;
        list += (list.empty() ? "" : ", ") + std::string(a);
    }
    throw usage_error(cfg.where(key) + ": unknown " + what + " '" + excerpt(value) + "' (allowed: " + list + ")");
}

/// [output], [sched], [run], [tuning]: where results go and how the run is carried out; [lhapdf]:
/// what `export lhapdf` reads back from the stored resolved config.
void read_run(FitConfig& cfg, const Values& v) {
    cfg.output_file = v.required("output.file");
    cfg.output_in_place = choice(cfg, v, "output.in_place", "value", {"auto", "on", "off"});
    cfg.sched_policy = choice(cfg, v, "sched.policy", "policy", {"static", "dynamic", "guided", "weighted"});
    cfg.run = parse_run_settings({[&](const std::string& key) { return trim(v.get(key)); },
                                  [&](const std::string& key) { return cfg.where(key); }});
    cfg.gpu_lm_steps = choice(cfg, v, "tuning.gpu_lm_steps", "value", {"warp", "thread"});
    cfg.gpu_round_loop = choice(cfg, v, "tuning.gpu_round_loop", "value", {"device", "host"});
    if (cfg.origins.count("lhapdf.set_index"))
        cfg.lhapdf_set_index =
            ini::to_integer(v.get("lhapdf.set_index"), cfg.where("lhapdf.set_index"), 0, kMaxLhapdfSetIndex);
}

}  // namespace

FitConfig load_fit_config(const std::string& path, const std::vector<std::string>& given) {
    const std::vector<std::string> overrides = ini::last_overrides_win(given);
    FitConfig cfg;
    cfg.config_file = path;
    std::vector<std::string> param_order, norm_order;
    const std::vector<ini::ScannedKey> scanned = scan_ini(path, param_order, norm_order);
    add_override_params(overrides, param_order);
    const po::variables_map vm = parse_values(path, scanned, overrides, param_order, norm_order, cfg);
    for (const auto& s : scanned)
        if (!cfg.origins.count(s.key)) cfg.origins[s.key] = KeyOrigin{path, s.line};
    // Model option keys parsed above under their short names: drop the generic ones.
    for (const char* k : {"name", "formula", "order", "peaks", "compile", "compile_timeout"}) cfg.model_options.erase(k);

    const Values values(vm, cfg);
    read_data(cfg, values);
    read_correlated(cfg, values, norm_order);
    read_model(cfg, values);
    read_params(cfg, values, param_order);
    read_fit(cfg, values);
    read_run(cfg, values);
    return cfg;
}

std::string fit_config_help() {
    std::ostringstream os;
    os << "Config keys (INI sections; each can be overridden as --section.key VALUE):\n";
    ini::write_key_help(os, kKeys, 16, "none");
    os << "  [model] keys of name = dis-mellin (all optional):\n" << dis_mellin_settings_help();
    os << "  [normalisation.NAME]  sigma: " << kNormKeys[0].help << "\n";
    os << "  [param.NAME]   one section per model parameter, in the model's order\n";
    for (const auto& k : kParamKeys) {
        os << "    " << k.key << std::string(16 - std::string(k.key).size(), ' ') << k.help
           << " (default: " << (*k.def ? k.def : "none") << ")\n";
    }
    std::string dis;
    for (const auto& name : dis_mellin_param_names()) dis += " " + name;
    os << "  parameters (NAME) of each model:\n"
       << "    linear a b; polynomial c0 .. c<order>; exponential a k c; gaussian c a1 mu1 s1 .. a<peaks> "
          "mu<peaks> s<peaks>;\n    gaussian2d a u v s c; formula: the names its formula uses; dis-mellin"
       << dis << "\n    plugin (model.plugin = lib.so): the plugin's param_names\n";
    return os.str();
}

}  // namespace ef
