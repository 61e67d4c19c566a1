// SPDX-License-Identifier: MIT
#include <ensemblefit/config/fit_config.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <boost/program_options.hpp>

#include <ensemblefit/core/error.hpp>

#include "src/core/text.hpp"

namespace po = boost::program_options;

namespace ef {
namespace {

/// The fixed keys: name, default (empty = none), help. `[param.NAME]` keys are added per name.
struct KeyInfo {
    const char* key;
    const char* def;
    const char* help;
};

const KeyInfo kKeys[] = {
    {"data.file", "", "data file: CSV with a header row, or HDF5 with one 1-D dataset per column "
                      "(relative paths are taken from the config file's folder)"},
    {"data.x", "x", "independent variable column(s), comma-separated for several"},
    {"data.y", "y", "dependent variable column"},
    {"data.sigma", "", "uncertainty: a column name or a positive constant"},
    {"model.name", "", "formula | linear | polynomial | exponential | gaussian | dis-mellin"},
    {"model.formula", "", "the model for name = formula, over parameter and x column names"},
    {"model.order", "1", "polynomial order (name = polynomial)"},
    {"model.peaks", "1", "number of Gaussian peaks (name = gaussian)"},
    {"fit.replicas", "0", "resampled replicas R >= 0, numbered 1..R (replica 0, the fit to the "
                          "data as given, is always done)"},
    {"fit.resample", "smear", "smear (y + sigma z) | bootstrap (points drawn with replacement)"},
    {"fit.seed", "1", "seed of the counter-based generator (replica r is a function of seed, r)"},
    {"fit.max_iterations", "1000", "Jacobian evaluations per replica before giving up"},
    {"fit.ftol", "1e-15", "stop when actual and predicted relative chi^2 reductions are below"},
    {"fit.xtol", "1e-10", "stop when the Gauss-Newton step, relative to the parameters (scaled), is below"},
    {"fit.gtol", "1e-12", "stop when the gradient's cosine with every column is below"},
    {"fit.chunk", "0", "replicas per work unit (0 = automatic: 4 per thread, at most 1/8 of a rank's share)"},
    {"output.file", "", "HDF5 result file (relative to the current directory)"},
    {"sched.policy", "dynamic", "static | dynamic | guided | weighted (work units in proportion to "
                                "each rank's measured throughput: for mixed CPU and GPU ranks)"},
    {"run.workers", "auto", "auto | cpu | gpu"},
    {"run.threads", "0", "OpenMP threads per rank (0 = SLURM_CPUS_PER_TASK, else OMP_NUM_THREADS, "
                         "else cores / ranks on the node)"},
};

const KeyInfo kParamKeys[] = {
    {"start", "", "starting value (required)"},
    {"lower", "-inf", "lower bound (may be -inf)"},
    {"upper", "inf", "upper bound (may be inf)"},
    {"fixed", "false", "true to hold the parameter at its start value"},
};

const std::set<std::string> kSections = {"data", "model", "fit", "output", "sched", "run"};

bool is_fixed_key(const std::string& key) {
    return std::any_of(std::begin(kKeys), std::end(kKeys),
                       [&](const KeyInfo& k) { return key == k.key; });
}

bool is_param_subkey(const std::string& sub) {
    return std::any_of(std::begin(kParamKeys), std::end(kParamKeys),
                       [&](const KeyInfo& k) { return sub == k.key; });
}

std::string allowed_keys_of(const std::string& section) {
    std::string out;
    for (const auto& k : kKeys) {
        const std::string key = k.key;
        if (key.rfind(section + ".", 0) == 0) out += (out.empty() ? "" : ", ") + key.substr(section.size() + 1);
    }
    return out;
}

/// Splits "param.NAME.sub" into NAME and sub; false if it is not of that shape.
bool split_param_key(const std::string& key, std::string& name, std::string& sub) {
    if (key.rfind("param.", 0) != 0) return false;
    const auto last = key.rfind('.');
    if (last <= 6) return false;
    name = key.substr(6, last - 6);
    sub = key.substr(last + 1);
    return !name.empty() && !sub.empty();
}

struct ScannedKey {
    std::string key;
    std::string value;
    int line;
};

/// Reads the INI file once to check its shape and remember where every key is, so that every
/// later error can name the line; Boost.Program_options itself keeps no line numbers.
std::vector<ScannedKey> scan_ini(const std::string& path, std::vector<std::string>& param_order) {
    std::ifstream in(path);
    if (!in) throw usage_error(path + ": cannot open config file (" + std::strerror(errno) + ")");
    std::vector<ScannedKey> keys;
    std::set<std::string> seen;
    std::string section;
    std::string raw;
    int line = 0;
    while (std::getline(in, raw)) {
        ++line;
        const std::string s = trim(raw);
        if (s.empty() || s[0] == '#' || s[0] == ';') continue;
        const std::string at = path + ":" + std::to_string(line) + ": ";
        if (s.front() == '[') {
            if (s.back() != ']') throw usage_error(at + "malformed section header '" + s + "'");
            section = trim(s.substr(1, s.size() - 2));
            if (section.rfind("param.", 0) == 0) {
                const std::string name = section.substr(6);
                if (name.empty() || name.find('.') != std::string::npos)
                    throw usage_error(at + "malformed parameter section [" + section + "]");
                if (std::find(param_order.begin(), param_order.end(), name) != param_order.end())
                    throw usage_error(at + "parameter section [" + section + "] appears twice");
                param_order.push_back(name);
            } else if (!kSections.count(section)) {
                throw usage_error(at + "unknown section [" + section +
                                  "] (allowed: data, model, fit, output, sched, run, param.NAME)");
            }
            continue;
        }
        const auto eq = s.find('=');
        if (eq == std::string::npos) throw usage_error(at + "expected 'key = value', got '" + s + "'");
        if (section.empty()) throw usage_error(at + "key outside of any [section]");
        const std::string key = section + "." + trim(s.substr(0, eq));
        std::string value = trim(s.substr(eq + 1));
        // Inline comments: " # ..." after a value (a formula never contains '#').
        const auto hash = value.find(" #");
        if (hash != std::string::npos) value = trim(value.substr(0, hash));
        if (section.rfind("param.", 0) == 0) {
            const std::string sub = trim(s.substr(0, eq));
            if (!is_param_subkey(sub))
                throw usage_error(at + "unknown key '" + sub + "' in [" + section +
                                  "] (allowed: start, lower, upper, fixed)");
        } else if (section == "model") {
            // Models with options of their own (dis-mellin) validate [model] keys themselves.
        } else if (!is_fixed_key(key)) {
            throw usage_error(at + "unknown key '" + trim(s.substr(0, eq)) + "' in [" + section +
                              "] (allowed: " + allowed_keys_of(section) + ")");
        }
        if (!seen.insert(key).second) throw usage_error(at + "key '" + key + "' is set twice");
        keys.push_back({key, value, line});
    }
    return keys;
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

std::string fmt_double(double v) {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
}

std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
    return out;
}

}  // namespace

std::string FitConfig::canonical_text() const {
    std::ostringstream os;
    os << "[data]\nx = " << join(x_columns) << "\ny = " << y_column << "\nsigma = " << sigma << "\n";
    os << "[model]\nname = " << model_name << "\n";
    if (model_name == "formula") os << "formula = " << formula << "\n";
    if (model_name == "polynomial") os << "order = " << order << "\n";
    if (model_name == "gaussian") os << "peaks = " << peaks << "\n";
    for (const auto& [k, v] : model_options) os << k << " = " << v << "\n";
    for (const auto& p : params) {
        os << "[param." << p.name << "]\nstart = " << fmt_double(p.start)
           << "\nlower = " << fmt_double(p.lower) << "\nupper = " << fmt_double(p.upper)
           << "\nfixed = " << (p.fixed ? "true" : "false") << "\n";
    }
    os << "[fit]\nreplicas = " << replicas
       << "\nresample = " << (resample == ResampleMethod::smear ? "smear" : "bootstrap")
       << "\nseed = " << seed << "\nmax_iterations = " << max_iterations
       << "\nftol = " << fmt_double(ftol) << "\nxtol = " << fmt_double(xtol)
       << "\ngtol = " << fmt_double(gtol) << "\n";
    return os.str();
}

std::string FitConfig::resolved_text() const {
    std::ostringstream os;
    os << "# config file: " << config_file << "\n[data]\nfile = " << data_file << "\n"
       << canonical_text() << "chunk = " << chunk << "\n[output]\nfile = " << output_file
       << "\n[sched]\npolicy = " << sched_policy << "\n[run]\nworkers = " << workers << "\nthreads = " << threads << "\n";
    return os.str();
}

namespace {

class Converter {
   public:
    explicit Converter(const FitConfig& c) : c_(c) {}

    double real(const std::string& key, const std::string& v) const {
        const std::string t = trim(v);
        if (t == "inf" || t == "+inf") return std::numeric_limits<double>::infinity();
        if (t == "-inf") return -std::numeric_limits<double>::infinity();
        char* end = nullptr;
        errno = 0;
        const double d = std::strtod(t.c_str(), &end);
        if (t.empty() || end != t.c_str() + t.size() || errno == ERANGE || std::isnan(d))
            throw usage_error(c_.where(key) + ": expected a number, got '" + v + "'");
        return d;
    }
    long long integer(const std::string& key, const std::string& v) const {
        const std::string t = trim(v);
        char* end = nullptr;
        errno = 0;
        const long long i = std::strtoll(t.c_str(), &end, 10);
        if (t.empty() || end != t.c_str() + t.size() || errno == ERANGE)
            throw usage_error(c_.where(key) + ": expected an integer, got '" + v + "'");
        return i;
    }
    bool boolean(const std::string& key, const std::string& v) const {
        std::string t = trim(v);
        std::transform(t.begin(), t.end(), t.begin(), ::tolower);
        if (t == "true" || t == "1" || t == "yes" || t == "on") return true;
        if (t == "false" || t == "0" || t == "no" || t == "off") return false;
        throw usage_error(c_.where(key) + ": expected true or false, got '" + v + "'");
    }

   private:
    const FitConfig& c_;
};

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

std::string folder_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

}  // namespace

/// Keeps the last of repeated "--key=value" overrides, as command lines usually do.
std::vector<std::string> last_overrides_win(const std::vector<std::string>& in) {
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (auto it = in.rbegin(); it != in.rend(); ++it) {
        const std::string key = it->substr(0, it->find('='));
        if (key.rfind("--", 0) == 0 && !seen.insert(key).second) continue;
        out.insert(out.begin(), *it);
    }
    return out;
}

FitConfig load_fit_config(const std::string& path, const std::vector<std::string>& given) {
    const std::vector<std::string> overrides = last_overrides_win(given);
    FitConfig cfg;
    cfg.config_file = path;
    std::vector<std::string> param_order;
    const std::vector<ScannedKey> scanned = scan_ini(path, param_order);

    // Parameters named only on the command line are added after the file's.
    for (size_t i = 0; i < overrides.size(); ++i) {
        std::string key = overrides[i];
        if (key.rfind("--", 0) != 0) continue;
        key = key.substr(2, key.find('=') == std::string::npos ? std::string::npos : key.find('=') - 2);
        std::string name, sub;
        if (split_param_key(key, name, sub) &&
            std::find(param_order.begin(), param_order.end(), name) == param_order.end())
            param_order.push_back(name);
    }

    po::options_description desc;
    for (const auto& k : kKeys) desc.add_options()(k.key, po::value<std::string>(), k.help);
    for (const auto& name : param_order)
        for (const auto& k : kParamKeys)
            desc.add_options()(("param." + name + "." + k.key).c_str(), po::value<std::string>(), k.help);

    po::variables_map vm;
    try {
        // Command line first: Boost.Program_options keeps the first value stored for a key.
        const po::parsed_options cli =
            po::command_line_parser(overrides)
                .options(desc)
                .style(po::command_line_style::default_style &
                       ~po::command_line_style::allow_guessing)  // no silent abbreviations
                .allow_unregistered()
                .run();
        for (const auto& o : cli.options) {
            if (!o.unregistered) continue;
            if (o.string_key.rfind("model.", 0) == 0) {
                if (o.value.size() != 1) throw usage_error("--" + o.string_key + ": expects one value");
                cfg.model_options[o.string_key.substr(6)] = o.value[0];
                cfg.origins[o.string_key] = KeyOrigin{"", 0};
                continue;
            }
            throw usage_error("unknown option '--" + o.string_key + "' (see ensemblefit fit --help)");
        }
        po::store(cli, vm);
        for (const auto& o : cli.options)
            if (!o.unregistered) cfg.origins[o.string_key] = KeyOrigin{"", 0};

        std::ifstream in(path);
        const po::parsed_options file = po::parse_config_file(in, desc, true);
        for (const auto& o : file.options) {
            if (!o.unregistered) continue;
            // Only [model] may carry keys the generic table does not know (model options).
            const std::string sub = o.string_key.substr(6);
            if (!cfg.model_options.count(sub)) cfg.model_options[sub] = o.value.empty() ? "" : o.value[0];
        }
        po::store(file, vm);
    } catch (const po::error& e) {
        throw usage_error(path + ": " + e.what());
    }
    for (const auto& s : scanned)
        if (!cfg.origins.count(s.key)) cfg.origins[s.key] = KeyOrigin{path, s.line};
    // Model option keys parsed above under their short names: drop the generic ones.
    for (const char* k : {"name", "formula", "order", "peaks"}) cfg.model_options.erase(k);

    const Converter conv(cfg);
    auto get = [&](const std::string& key) -> std::string {
        if (vm.count(key)) return vm[key].as<std::string>();
        for (const auto& k : kKeys)
            if (key == k.key) return k.def;
        for (const auto& k : kParamKeys)
            if (key.size() > std::string(k.key).size() &&
                key.compare(key.size() - std::string(k.key).size(), std::string::npos, k.key) == 0)
                return k.def;
        return "";
    };
    auto required = [&](const std::string& key) {
        const std::string v = trim(get(key));
        if (v.empty()) throw usage_error(path + ": missing required key '" + key + "'");
        return v;
    };

    // [data]
    cfg.data_file = required("data.file");
    if (cfg.data_file[0] != '/' && cfg.origins[("data.file")].line > 0)
        cfg.data_file = folder_of(path) + cfg.data_file;
    cfg.x_columns = split_list(get("data.x"));
    if (cfg.x_columns.empty()) throw usage_error(cfg.where("data.x") + ": no column named");
    cfg.y_column = trim(get("data.y"));
    cfg.sigma = required("data.sigma");
    {
        char* end = nullptr;
        const double v = std::strtod(cfg.sigma.c_str(), &end);
        if (end == cfg.sigma.c_str() + cfg.sigma.size()) {
            cfg.sigma_is_constant = true;
            cfg.sigma_constant = v;
            if (!(v > 0.0) || !std::isfinite(v))
                throw usage_error(cfg.where("data.sigma") + ": a constant sigma must be positive and "
                                                            "finite, got '" + cfg.sigma + "'");
        }
    }

    // [model]
    cfg.model_name = required("model.name");
    static const std::set<std::string> kModels = {"formula", "linear", "polynomial",
                                                  "exponential", "gaussian", "dis-mellin"};
    if (!kModels.count(cfg.model_name))
        throw usage_error(cfg.where("model.name") + ": unknown model '" + cfg.model_name +
                          "' (allowed: formula, linear, polynomial, exponential, gaussian, "
                          "dis-mellin)");
    cfg.formula = trim(get("model.formula"));
    if (cfg.model_name == "formula" && cfg.formula.empty())
        throw usage_error(path + ": missing required key 'model.formula' (model.name = formula)");
    cfg.order = static_cast<int>(conv.integer("model.order", get("model.order")));
    if (cfg.order < 0 || cfg.order > 20)
        throw usage_error(cfg.where("model.order") + ": order must be in 0..20, got " +
                          std::to_string(cfg.order));
    cfg.peaks = static_cast<int>(conv.integer("model.peaks", get("model.peaks")));
    if (cfg.peaks < 1 || cfg.peaks > 20)
        throw usage_error(cfg.where("model.peaks") + ": peaks must be in 1..20, got " +
                          std::to_string(cfg.peaks));
    if (cfg.model_name != "dis-mellin" && !cfg.model_options.empty()) {
        const std::string key = "model." + cfg.model_options.begin()->first;
        throw usage_error(cfg.where(key) + ": unknown key for model '" + cfg.model_name +
                          "' (allowed: name, formula, order, peaks)");
    }

    // [param.NAME]
    for (const auto& name : param_order) {
        ParamSpec p;
        p.name = name;
        const std::string pre = "param." + name + ".";
        const std::string start = trim(get(pre + "start"));
        if (start.empty()) throw usage_error(path + ": [param." + name + "] has no 'start'");
        p.start = conv.real(pre + "start", start);
        if (!std::isfinite(p.start))
            throw usage_error(cfg.where(pre + "start") + ": start must be finite");
        p.lower = conv.real(pre + "lower", get(pre + "lower"));
        p.upper = conv.real(pre + "upper", get(pre + "upper"));
        p.fixed = conv.boolean(pre + "fixed", get(pre + "fixed"));
        if (p.lower > p.upper)
            throw usage_error(cfg.where(pre + "lower") + ": lower bound " + fmt_double(p.lower) +
                              " is above upper bound " + fmt_double(p.upper));
        if (p.start < p.lower || p.start > p.upper)
            throw usage_error(cfg.where(pre + "start") + ": start " + fmt_double(p.start) +
                              " is outside [" + fmt_double(p.lower) + ", " + fmt_double(p.upper) + "]");
        cfg.params.push_back(p);
    }
    if (cfg.params.empty()) throw usage_error(path + ": no [param.NAME] sections");

    // [fit]
    cfg.replicas = conv.integer("fit.replicas", get("fit.replicas"));
    if (cfg.replicas < 0)
        throw usage_error(cfg.where("fit.replicas") + ": replicas must be >= 0, got " +
                          std::to_string(cfg.replicas));
    const std::string rs = trim(get("fit.resample"));
    if (rs == "smear") cfg.resample = ResampleMethod::smear;
    else if (rs == "bootstrap") cfg.resample = ResampleMethod::bootstrap;
    else throw usage_error(cfg.where("fit.resample") + ": unknown method '" + rs +
                           "' (allowed: smear, bootstrap)");
    const long long seed = conv.integer("fit.seed", get("fit.seed"));
    if (seed < 0) throw usage_error(cfg.where("fit.seed") + ": seed must be >= 0");
    cfg.seed = static_cast<std::uint64_t>(seed);
    cfg.max_iterations = static_cast<int>(conv.integer("fit.max_iterations", get("fit.max_iterations")));
    if (cfg.max_iterations < 1)
        throw usage_error(cfg.where("fit.max_iterations") + ": must be >= 1");
    for (auto [key, dst] : {std::pair{"fit.ftol", &cfg.ftol}, std::pair{"fit.xtol", &cfg.xtol},
                            std::pair{"fit.gtol", &cfg.gtol}}) {
        *dst = conv.real(key, get(key));
        if (!(*dst >= 0.0) || !std::isfinite(*dst))
            throw usage_error(cfg.where(key) + ": tolerance must be finite and >= 0");
    }
    cfg.chunk = static_cast<int>(conv.integer("fit.chunk", get("fit.chunk")));
    if (cfg.chunk < 0) throw usage_error(cfg.where("fit.chunk") + ": must be >= 0");

    // [output], [sched], [run]
    cfg.output_file = required("output.file");
    cfg.sched_policy = trim(get("sched.policy"));
    if (cfg.sched_policy != "static" && cfg.sched_policy != "dynamic" && cfg.sched_policy != "guided" &&
        cfg.sched_policy != "weighted")
        throw usage_error(cfg.where("sched.policy") + ": unknown policy '" + cfg.sched_policy +
                          "' (allowed: static, dynamic, guided, weighted)");
    cfg.workers = trim(get("run.workers"));
    if (cfg.workers != "auto" && cfg.workers != "cpu" && cfg.workers != "gpu")
        throw usage_error(cfg.where("run.workers") + ": unknown worker kind '" + cfg.workers +
                          "' (allowed: auto, cpu, gpu)");
    cfg.threads = static_cast<int>(conv.integer("run.threads", get("run.threads")));
    if (cfg.threads < 0) throw usage_error(cfg.where("run.threads") + ": must be >= 0");
    return cfg;
}

std::string fit_config_help() {
    std::ostringstream os;
    os << "Config keys (INI sections; each can be overridden as --section.key VALUE):\n";
    std::string section;
    for (const auto& k : kKeys) {
        const std::string key = k.key;
        const std::string sec = key.substr(0, key.find('.'));
        if (sec != section) {
            os << "  [" << sec << "]\n";
            section = sec;
        }
        os << "    " << key.substr(sec.size() + 1);
        os << std::string(std::max<size_t>(2, 16 - (key.size() - sec.size() - 1)), ' ');
        os << k.help << " (default: " << (*k.def ? k.def : "none, required where used") << ")\n";
    }
    os << "  [param.NAME]   one section per model parameter, in the model's order\n";
    for (const auto& k : kParamKeys) {
        os << "    " << k.key << std::string(16 - std::string(k.key).size(), ' ') << k.help
           << " (default: " << (*k.def ? k.def : "none") << ")\n";
    }
    return os.str();
}

}  // namespace ef
