// SPDX-License-Identifier: MIT
#include "src/io/commondata.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <yaml-cpp/yaml.h>

#include <ensemblefit/core/error.hpp>

#include "src/core/text.hpp"

namespace ef {
namespace {

bool is_file(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_folder(const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string fmt(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
}

/// "FILE:LINE: " of a node (yaml-cpp's marks are 0-based); "FILE: " where it has none.
std::string at(const std::string& file, const YAML::Node& n) {
    const YAML::Mark m = n.Mark();
    if (m.is_null()) return file + ": ";
    return file + ":" + std::to_string(m.line + 1) + ": ";
}

/// One YAML file, parsed: a syntax error is one line naming the file and line.
YAML::Node load_yaml(const std::string& file) {
    if (!is_file(file)) throw data_error(file + ": no such file (named by the set's metadata.yaml)");
    try {
        return YAML::LoadFile(file);
    } catch (const YAML::ParserException& e) {
        throw data_error(file + ":" + std::to_string(e.mark.line + 1) + ": YAML syntax error: " + e.msg);
    } catch (const YAML::Exception& e) {
        throw data_error(file + ": cannot read: " + std::string(e.what()));
    }
}

/// parent[key], which must exist; `what` names the parent in the message ("bin 5", ...).
YAML::Node child(const std::string& file, const YAML::Node& parent, const std::string& key, const std::string& what) {
    if (!parent.IsMap())
        throw data_error(at(file, parent) + what + ": expected a mapping with key '" + key + "'");
    YAML::Node n = parent[key];
    if (!n.IsDefined() || n.IsNull()) throw data_error(at(file, parent) + what + ": missing key '" + key + "'");
    return n;
}

std::string text(const std::string& file, const YAML::Node& n, const std::string& what) {
    if (!n.IsScalar()) throw data_error(at(file, n) + what + ": expected a text value");
    return n.Scalar();
}

double number(const std::string& file, const YAML::Node& n, const std::string& what) {
    double v = 0.0;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v))
        throw data_error(at(file, n) + what + ": expected a finite number, got '" +
                         excerpt(n.IsScalar() ? n.Scalar() : std::string("(not a value)")) + "'");
    return v;
}

/// A sequence of `ndata` entries (data_central, bins).
YAML::Node sequence(const std::string& file, const YAML::Node& doc, const std::string& key, size_t ndata,
                    const std::string& meta) {
    const YAML::Node s = child(file, doc, key, "top level");
    if (!s.IsSequence()) throw data_error(at(file, s) + key + ": expected a list");
    if (s.size() != ndata)
        throw data_error(at(file, s) + key + ": " + std::to_string(s.size()) + " entries, but " + meta + " says ndata = " +
                         std::to_string(ndata));
    return s;
}

/// A list of file names (variants' data_uncertainties), possibly empty.
std::vector<std::string> names_of(const std::string& file, const YAML::Node& n, const std::string& what) {
    std::vector<std::string> out;
    if (!n.IsDefined() || n.IsNull()) return out;
    if (!n.IsSequence()) throw data_error(at(file, n) + what + ": expected a list of file names");
    for (const auto& e : n) out.push_back(text(file, e, what));
    return out;
}

/// The implemented observable whose files are in the folder, and its uncertainty files (the
/// top-level data_uncertainties, else the `legacy` variant, else the only variant).
struct Observable {
    std::string data_central, kinematics;
    std::vector<std::string> uncertainties;
    size_t ndata = 0;
};

Observable pick_observable(const std::string& dir, const std::string& meta, const YAML::Node& doc) {
    const YAML::Node list = child(meta, doc, "implemented_observables", "top level");
    if (!list.IsSequence()) throw data_error(at(meta, list) + "implemented_observables: expected a list");
    std::vector<YAML::Node> here;
    std::string absent;
    for (const auto& o : list) {
        const std::string central = text(meta, child(meta, o, "data_central", "observable"), "data_central");
        if (is_file(dir + central)) here.push_back(o);
        else absent += (absent.empty() ? "" : ", ") + central;
    }
    if (here.empty())
        throw data_error(meta + ": no implemented observable has its data_central file in the folder (looked for: " +
                         excerpt(absent, 200) + ")");
    if (here.size() > 1)
        throw data_error(at(meta, here[1]) + "two implemented observables have their files in the folder; "
                         "ensemblefit reads one per set (remove the other's data_central file)");
    const YAML::Node o = here.front();
    const std::string name = o["observable_name"].IsScalar() ? o["observable_name"].Scalar() : "?";
    const YAML::Node theory = o["theory"];
    if (theory.IsMap() && theory["operation"].IsScalar()) {
        const std::string op = theory["operation"].Scalar();
        if (op != "NULL" && op != "null")
            throw usage_error(at(meta, theory["operation"]) + "observable " + name + " has theory operation " + op +
                              " (" + (op == "RATIO" ? "a ratio of structure functions, such as NMC's F2d/F2p" : "not F2") +
                              "): dis-mellin fits F2 only; leave this set out of [data] sets");
    }
    Observable ob;
    ob.data_central = text(meta, child(meta, o, "data_central", "observable " + name), "data_central");
    ob.kinematics = text(meta, child(meta, child(meta, o, "kinematics", "observable " + name), "file", "kinematics"),
                         "kinematics.file");
    const YAML::Node nd = child(meta, o, "ndata", "observable " + name);
    const double n = number(meta, nd, "ndata");
    if (!(n >= 1.0) || n != std::floor(n) || n > 1e7)
        throw data_error(at(meta, nd) + "ndata: expected a positive whole number, got '" + nd.Scalar() + "'");
    ob.ndata = static_cast<size_t>(n);
    ob.uncertainties = names_of(meta, o["data_uncertainties"], "data_uncertainties");
    if (ob.uncertainties.empty()) {
        const YAML::Node variants = o["variants"];
        if (variants.IsMap()) {
            if (variants["legacy"].IsMap()) {
                ob.uncertainties = names_of(meta, variants["legacy"]["data_uncertainties"], "variants.legacy");
            } else if (variants.size() == 1) {
                ob.uncertainties = names_of(meta, variants.begin()->second["data_uncertainties"], "variants");
            }
        }
    }
    if (ob.uncertainties.empty())
        throw data_error(at(meta, o) + "observable " + name + ": no data_uncertainties (top level or variant legacy)");
    return ob;
}

/// The uncertainty sources of one file (definitions, then bins) appended to `s`.
void read_uncertainties(const std::string& file, size_t ndata, const std::string& meta, CommondataSet& s) {
    const YAML::Node doc = load_yaml(file);
    const YAML::Node defs = child(file, doc, "definitions", "top level");
    if (!defs.IsMap()) throw data_error(at(file, defs) + "definitions: expected a mapping of source names");
    const size_t first = s.source.size();
    for (const auto& d : defs) {
        const std::string src = d.first.Scalar();
        const std::string what = "definitions." + src;
        if (std::find(s.source.begin(), s.source.end(), src) != s.source.end())
            throw data_error(at(file, d.first) + what + ": source named twice in the set");
        const YAML::Node tr = child(file, d.second, "treatment", what);
        const std::string t = text(file, tr, what + ".treatment");
        if (t != "ADD" && t != "MULT")
            throw data_error(at(file, tr) + what + ".treatment: unknown treatment '" + excerpt(t) +
                             "' (allowed: ADD, MULT)");
        const YAML::Node ty = child(file, d.second, "type", what);
        const std::string type = text(file, ty, what + ".type");
        if (type == "SKIP" || type == "THEORYCORR" || type == "THEORYUNCORR")
            throw data_error(at(file, ty) + what + ".type: '" + type + "' is not supported (allowed: UNCORR, CORR, "
                             "or a name correlated across sets)");
        s.source.push_back(src);
        s.type.push_back(type);
        s.treatment.push_back(t == "MULT" ? CommondataTreatment::mult : CommondataTreatment::add);
    }
    const size_t S = s.source.size(), mine = S - first;
    if (mine == 0) throw data_error(at(file, defs) + "definitions: no uncertainty source");
    // Re-lay the values n x S: earlier files' columns first.
    std::vector<double> v(ndata * S, 0.0);
    for (size_t i = 0; i < ndata && first > 0; ++i)
        std::copy_n(s.values.begin() + static_cast<long>(i * first), first, v.begin() + static_cast<long>(i * S));
    const YAML::Node bins = sequence(file, doc, "bins", ndata, meta);
    for (size_t i = 0; i < ndata; ++i) {
        const YAML::Node b = bins[i];
        const std::string what = "bin " + std::to_string(i + 1);
        if (!b.IsMap()) throw data_error(at(file, b) + what + ": expected a mapping of source: value");
        if (b.size() != mine)
            throw data_error(at(file, b) + what + ": " + std::to_string(b.size()) + " sources, but definitions has " +
                             std::to_string(mine));
        for (size_t k = first; k < S; ++k) {
            const double u = number(file, child(file, b, s.source[k], what), what + ": " + s.source[k]);
            if (s.type[k] == "UNCORR" && u < 0.0)
                throw data_error(at(file, b[s.source[k]]) + what + ": " + s.source[k] + ": negative uncertainty " + fmt(u) +
                                 " (an UNCORR source is a standard deviation)");
            v[i * S + k] = u;
        }
    }
    s.values = std::move(v);
}

}  // namespace

CommondataSet read_commondata_set(const std::string& folder, const std::string& name) {
    CommondataSet s;
    s.name = name;
    s.folder = folder + (folder.empty() || folder.back() == '/' ? "" : "/") + name + "/";
    if (!is_folder(s.folder)) throw usage_error(s.folder + ": no such commondata set folder (data.sets)");
    const bool proton = name.size() > 2 && name.compare(name.size() - 2, 2, "_P") == 0;
    const bool deuteron = name.size() > 2 && name.compare(name.size() - 2, 2, "_D") == 0;
    const std::string meta = s.folder + "metadata.yaml";
    const YAML::Node mdoc = load_yaml(meta);
    const Observable ob = pick_observable(s.folder, meta, mdoc);  // refuses a ratio first
    if (!proton && !deuteron)
        throw usage_error(s.folder + ": cannot tell the target: the set's name ends in neither _P (proton) nor "
                          "_D (deuteron)");
    s.target = proton ? 1 : 3;

    const std::string dfile = s.folder + ob.data_central;
    const YAML::Node central = sequence(dfile, load_yaml(dfile), "data_central", ob.ndata, meta);
    for (size_t i = 0; i < ob.ndata; ++i)
        s.f2.push_back(number(dfile, central[i], "data_central entry " + std::to_string(i + 1)));

    const std::string kfile = s.folder + ob.kinematics;
    const YAML::Node bins = sequence(kfile, load_yaml(kfile), "bins", ob.ndata, meta);
    for (size_t i = 0; i < ob.ndata; ++i) {
        const std::string what = "bin " + std::to_string(i + 1);
        const double x = number(kfile, child(kfile, child(kfile, bins[i], "x", what), "mid", what + ": x"), what + ": x.mid");
        const double q2 =
            number(kfile, child(kfile, child(kfile, bins[i], "Q2", what), "mid", what + ": Q2"), what + ": Q2.mid");
        if (!(x > 0.0 && x < 1.0)) throw data_error(at(kfile, bins[i]["x"]) + what + ": x.mid = " + fmt(x) + " is not in (0, 1)");
        if (!(q2 > 0.0)) throw data_error(at(kfile, bins[i]["Q2"]) + what + ": Q2.mid = " + fmt(q2) + " is not positive");
        s.x.push_back(x);
        s.q2.push_back(q2);
    }
    for (const auto& u : ob.uncertainties) read_uncertainties(s.folder + u, ob.ndata, meta, s);
    return s;
}

namespace {

/// The correlated columns of the sets in order: each CORR source of a set ("SET/source"), and each
/// shared type name (BCDMSNORM, ...) once, with its treatment (1 = MULT).
struct CommondataColumns {
    std::vector<std::string> names;
    std::vector<unsigned char> mult;
    /// Column of source k of set s; -1 for UNCORR (on the diagonal), -2 for one not assigned yet.
    long of(const CommondataSet& s, size_t k) const {
        if (s.type[k] == "UNCORR") return -1;
        const std::string col = s.type[k] == "CORR" ? s.name + "/" + s.source[k] : s.type[k];
        const auto it = std::find(names.begin(), names.end(), col);
        return it == names.end() ? -2 : it - names.begin();
    }
};

CommondataColumns commondata_columns(const std::vector<CommondataSet>& sets) {
    CommondataColumns cols;
    std::map<std::string, std::string> first_seen;  // shared type -> "SET source" that set its treatment
    for (const auto& s : sets) {
        std::vector<std::string> mine;
        for (size_t k = 0; k < s.source.size(); ++k) {
            if (s.type[k] == "UNCORR") continue;
            const std::string col = s.type[k] == "CORR" ? s.name + "/" + s.source[k] : s.type[k];
            const unsigned char m = s.treatment[k] == CommondataTreatment::mult ? 1 : 0;
            if (std::find(mine.begin(), mine.end(), col) != mine.end())
                throw data_error(s.folder + ": sources of type " + col + " twice in one set (source " + s.source[k] +
                                 "): ensemblefit correlates a type name across sets, one source per set");
            mine.push_back(col);
            const long c = cols.of(s, k);
            if (c >= 0) {
                if (cols.mult[static_cast<size_t>(c)] != m)
                    throw data_error(s.folder + ": source " + s.source[k] + " of type " + col + " is " +
                                     (m ? "MULT" : "ADD") + ", but " + first_seen[col] + " of the same type is " +
                                     (m ? "ADD" : "MULT") + " (one shared type needs one treatment)");
                continue;
            }
            cols.names.push_back(col);
            cols.mult.push_back(m);
            first_seen[col] = s.name + " " + s.source[k];
        }
    }
    return cols;
}

/// Appends the points of set d that pass the cuts: x, Q2, target; F2; sigma from the UNCORR
/// sources; a row of the correlated columns (MULT relative to the central value: times t0 in the
/// covariance). Returns how many were kept.
int append_set_points(const FitConfig& cfg, const CommondataSet& s, size_t d, const CommondataColumns& cols,
                      DataTable& data, CorrelatedInputs& in) {
    const size_t S = cols.names.size(), ns = s.source.size();
    std::vector<long> col(ns);
    for (size_t k = 0; k < ns; ++k) col[k] = cols.of(s, k);
    int kept = 0;
    for (size_t i = 0; i < s.x.size(); ++i) {
        const double x = s.x[i], q2 = s.q2[i], w2 = q2 * (1.0 - x) / x;
        if (!(q2 > cfg.q2_min && w2 > cfg.w2_min && x >= cfg.x_min && x <= cfg.x_max)) continue;
        ++kept;
        data.x.insert(data.x.end(), {x, q2, static_cast<double>(s.target)});
        data.y.push_back(s.f2[i]);
        double var = 0.0;
        std::vector<double> row(S, 0.0);
        for (size_t k = 0; k < ns; ++k) {
            const double u = s.values[i * ns + k];
            if (col[k] < 0) {
                var += u * u;
            } else if (s.treatment[k] == CommondataTreatment::mult) {
                if (s.f2[i] == 0.0)
                    throw data_error(s.folder + ": point " + std::to_string(i + 1) + ": MULT source " + s.source[k] +
                                     " on a central value of 0 (its relative size is undefined)");
                row[static_cast<size_t>(col[k])] = u / s.f2[i];
            } else {
                row[static_cast<size_t>(col[k])] = u;
            }
        }
        if (!(var > 0.0))
            throw data_error(s.folder + ": point " + std::to_string(i + 1) + " (x = " + fmt(x) + ", Q2 = " + fmt(q2) +
                             "): its UNCORR uncertainties are all zero (sigma must be positive)");
        data.sigma.push_back(std::sqrt(var));
        in.syst.insert(in.syst.end(), row.begin(), row.end());
        in.dataset.push_back(static_cast<double>(d));
    }
    return kept;
}

}  // namespace

void load_commondata(FitConfig& cfg, DataTable& data, CorrelatedInputs& in) {
    std::vector<CommondataSet> sets;
    for (const auto& name : cfg.commondata_sets) sets.push_back(read_commondata_set(cfg.commondata, name));
    const CommondataColumns cols = commondata_columns(sets);
    data = DataTable{};
    data.nx = 3;
    data.x_names = cfg.x_columns;
    in = CorrelatedInputs{};
    in.S = static_cast<int>(cols.names.size());
    for (size_t d = 0; d < sets.size(); ++d) {
        const CommondataSet& s = sets[d];
        in.dataset_names.push_back(s.name);
        if (append_set_points(cfg, s, d, cols, data, in) == 0)
            throw data_error(cfg.where("data.sets") + ": set " + s.name + ": the cuts (Q2 > " + fmt(cfg.q2_min) +
                             ", W2 > " + fmt(cfg.w2_min) + ", " + fmt(cfg.x_min) + " <= x <= " + fmt(cfg.x_max) +
                             ") leave none of its " + std::to_string(s.x.size()) + " points");
    }
    data.n = static_cast<int>(data.y.size());
    in.n = data.n;
    const auto free_params =
        std::count_if(cfg.params.begin(), cfg.params.end(), [](const ParamSpec& p) { return !p.fixed; });
    if (data.n < free_params)
        throw data_error(cfg.where("data.sets") + ": " + std::to_string(data.n) + " points after cuts for " +
                         std::to_string(free_params) + " free parameters");
    data.checksum = checksum_of(data);
    cfg.systematics = cols.names;
    cfg.systematic_mult = cols.mult;
}

}  // namespace ef
