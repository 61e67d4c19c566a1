// SPDX-License-Identifier: MIT
// `ensemblefit export lhapdf`: a dis-mellin fit as an LHAPDF 6 set (lhagrid1), Monte Carlo style.
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <boost/program_options.hpp>

#include <ensemblefit/config/fit_config.hpp>
#include <ensemblefit/core/error.hpp>

#include "src/cli/commands.hpp"
#include "src/config/ini_scan.hpp"
#include "src/io/results_file.hpp"
#include "src/model/dis_pdf.hpp"
#include "src/run/output_guard.hpp"
#include "src/run/run_args.hpp"

namespace po = boost::program_options;

namespace ef {
namespace {

const char* kLhapdfUsage =
    "usage: ensemblefit export lhapdf FILE.h5 -o DIR/NAME [--qmax Q] [--set-index N] [--overwrite]\n\n"
    "Writes the converged replicas of a dis-mellin fit as an LHAPDF 6 set: DIR/NAME/NAME.info and\n"
    "NAME_0000.dat (member 0: the replica mean, as Monte Carlo sets have it) .. NAME_nnnn.dat (the\n"
    "replicas), format lhagrid1. x: 60 knots log-spaced in [1e-6, 0.1] and 40 linear to 1; Q:\n"
    "log-spaced (12 knots per unit of ln Q) from Q0 to --qmax (GeV, default 1e4, at most 1e6),\n"
    "one subgrid per flavour segment with knots at the thresholds; a threshold less than one knot\n"
    "spacing above Q0 starts the grid (QMin = that mass). Flavours -5..5 (no top) and 21.\n"
    "--set-index N: the set's LHAPDF ID (SetIndex), an integer in 0..99999999; without it the fit's\n"
    "config key [lhapdf] set_index (stored in FILE.h5), else none. docs/models.md says how to load\n"
    "the set in LHAPDF.\n\noptions";

constexpr int kPids[] = {-5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 21};
/// Index in dis_pdf_names() of each pid above (b, c, s, ubar, dbar; d, u, s, c, b; g).
constexpr int kPdfOf[] = {7, 6, 5, 2, 4, 3, 1, 5, 6, 7, 0};

std::vector<double> x_knots() {
    std::vector<double> x;
    for (int i = 0; i < 60; ++i) x.push_back(std::pow(10.0, -6.0 + 5.0 * i / 60.0));
    for (int i = 0; i < 40; ++i) x.push_back(0.1 + 0.9 * i / 39.0);  // ends at 1
    return x;
}

constexpr double kKnotsPerLogQ = 12.0;

/// The heavy-quark masses the set has thresholds for (VFNS; none in the FFNS; no top unless mt).
std::vector<double> threshold_masses(const DisMellinSettings& s) {
    std::vector<double> m;
    if (s.nf != 0) return m;
    for (double v : {s.mc, s.mb, s.mt})
        if (v > 0.0) m.push_back(v);
    return m;
}

/// Q knots per subgrid: log-spaced, split at the thresholds between Q0 and qmax. No subgrid is
/// narrower than one knot spacing: a threshold that close above Q0 becomes the grid's start (a
/// subgrid 1.27..1.28 GeV would hold a few knots 0.003 GeV apart), one that close below qmax
/// its end.
std::vector<std::vector<double>> q_blocks(const DisMellinSettings& s, double qmax) {
    const double spacing = 1.0 / kKnotsPerLogQ;
    std::vector<double> edges{s.q0};
    for (double m : threshold_masses(s))
        if (m > s.q0 * (1 + 1e-12) && m < qmax) {
            if (edges.size() == 1 && std::log(m / edges.back()) < spacing) edges.back() = m;
            else edges.push_back(m);
        }
    if (edges.size() > 1 && std::log(qmax / edges.back()) < spacing) {
        qmax = edges.back();
        edges.pop_back();
    }
    edges.push_back(qmax);
    std::vector<std::vector<double>> blocks;
    for (std::size_t j = 0; j + 1 < edges.size(); ++j) {
        const double l0 = std::log(edges[j]), l1 = std::log(edges[j + 1]);
        const int n = std::max(4, static_cast<int>(std::ceil(kKnotsPerLogQ * (l1 - l0))));
        std::vector<double> q;
        for (int i = 0; i <= n; ++i) q.push_back(i == n ? edges[j + 1] : std::exp(l0 + (l1 - l0) * i / n));
        blocks.push_back(q);
    }
    return blocks;
}

std::string fmt_list(const std::vector<double>& v) {
    std::ostringstream os;
    os << std::setprecision(10);
    for (std::size_t i = 0; i < v.size(); ++i) os << (i ? " " : "") << v[i];
    return os.str();
}

/// One member's file: per block x line, Q line, pids line, then for each x, each Q the values.
std::string member_text(const std::string& type, const std::vector<double>& x,
                        const std::vector<std::vector<double>>& blocks, const std::vector<std::vector<double>>& values) {
    std::ostringstream out;
    out << "PdfType: " << type << "\nFormat: lhagrid1\n---\n";
    const std::size_t names = dis_pdf_names().size(), nx = x.size() - 1;  // x = 1 is written as 0
    out << std::scientific << std::setprecision(8);
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        out << fmt_list(x) << "\n" << fmt_list(blocks[b]) << "\n";
        for (int p : kPids) out << p << (p == 21 ? "\n" : " ");
        for (std::size_t i = 0; i <= nx; ++i)
            for (std::size_t j = 0; j < blocks[b].size(); ++j) {
                for (std::size_t f = 0; f < std::size(kPids); ++f) {
                    const std::size_t n = static_cast<std::size_t>(kPdfOf[f]);
                    const double v = i == nx ? 0.0 : values[b][(j * names + n) * nx + i];
                    out << (f ? " " : "") << v;
                }
                out << "\n";
            }
        out << "---\n";
    }
    return out.str();
}

/// Flavours active at the top of the grid: 3 + the thresholds below QMax (VFNS), or the FFNS nf.
int num_flavors(const DisMellinSettings& s, double qmax) {
    if (s.nf != 0) return s.nf;
    int n = 3;
    for (double m : threshold_masses(s))
        if (m < qmax * (1 - 1e-12)) ++n;
    return n;
}

std::string info_text(const DisMellinSettings& s, std::size_t members, const std::vector<std::vector<double>>& blocks,
                      const std::string& source, long long set_index) {
    std::ostringstream out;
    const qcd::QcdSettings qs = s.qcd();
    std::vector<double> qs_knots, as_vals;
    for (const auto& b : blocks)
        for (double q : b) {
            qs_knots.push_back(q);
            as_vals.push_back(16.0 * std::atan(1.0) * qcd::coupling_a(q * q, qs));
        }
    auto yaml = [](const std::vector<double>& v) {
        std::ostringstream os;
        os << std::setprecision(10) << "[";
        for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
        return os.str() + "]";
    };
    out << "Particle: 2212\nSetDesc: \"ensemblefit dis-mellin fit of " << source << "\"\n";
    if (set_index >= 0) out << "SetIndex: " << set_index << "\n";
    out << "Authors: ensemblefit\n"
        << "Reference: none\nFormat: lhagrid1\nDataVersion: 1\nNumMembers: " << members
        << "\nFlavors: [-5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 21]\n"
        << "OrderQCD: " << s.order - 1 << "\nFlavorScheme: " << (s.nf == 0 ? "variable" : "fixed")
        << "\nNumFlavors: " << num_flavors(s, blocks.back().back()) << "\nErrorType: replicas\nXMin: 1e-06\nXMax: 1\n"
        << "QMin: " << std::setprecision(10) << blocks.front().front() << "\nQMax: " << blocks.back().back()
        << "\nMZ: " << s.mz << "\nMUp: 0\nMDown: 0\nMStrange: 0\nMCharm: " << s.mc << "\nMBottom: " << s.mb
        << (s.mt > 0 ? "\nMTop: " : "") << (s.mt > 0 ? fmt_list({s.mt}) : "") << "\nAlphaS_MZ: " << 16.0 * std::atan(1.0) * qcd::coupling_a(s.mz * s.mz, qs)
        << "\nAlphaS_OrderQCD: " << s.order - 1 << "\nAlphaS_Type: ipol\nAlphaS_Qs: " << yaml(qs_knots)
        << "\nAlphaS_Vals: " << yaml(as_vals) << "\n";
    return out.str();
}

/// `[lhapdf] set_index` of the fit's config as the result file stores it (attribute config, the
/// resolved text), -1 when the fit set none. Validated when the fit read it; a value that is not
/// one now is a changed file (exit 3).
long long stored_set_index(const std::string& source, const std::string& resolved) {
    const auto keys = config_keys(resolved);
    const auto it = keys.find("lhapdf.set_index");
    if (it == keys.end()) return -1;
    try {
        return ini::to_integer(it->second, source + ": attribute config: lhapdf.set_index", 0, kMaxLhapdfSetIndex);
    } catch (const Error& e) {
        throw Error(ExitCode::data, e.what());
    }
}

std::string member_path(const std::string& dir, const std::string& name, std::size_t m) {
    char file[32];
    std::snprintf(file, sizeof file, "_%04zu.dat", m);
    return dir + "/" + name + file;
}

/// The set's files through the output guard: each checked (never the result file, an existing
/// one only with --overwrite) before anything is computed.
void check_set(const std::string& dir, const std::string& name, std::size_t members, bool overwrite,
               const std::string& source) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw data_error("export lhapdf: cannot create " + dir + ": " + ec.message());
    check_output_file(dir + "/" + name + ".info", "export lhapdf: -o", overwrite, {source});
    for (std::size_t m = 0; m < members; ++m) check_output_file(member_path(dir, name, m), "export lhapdf: -o", overwrite, {source});
}

/// Every member, then the .info, written under temporary names; renamed into place only once
/// all are complete (a full disk leaves the previous set as it was). With --overwrite, members
/// of a previous, larger set are removed after.
void write_set(const std::string& dir, const std::string& name, const std::vector<double>& x,
               const std::vector<std::vector<double>>& blocks,
               const std::vector<std::vector<std::vector<double>>>& members, const std::string& info, bool overwrite) {
    OutputFiles set("export lhapdf: -o");
    for (std::size_t m = 0; m < members.size(); ++m)
        set.add(member_path(dir, name, m), member_text(m == 0 ? "central" : "replica", x, blocks, members[m]));
    set.add(dir + "/" + name + ".info", info);
    set.commit();
    for (std::size_t m = members.size(); overwrite && file_exists(member_path(dir, name, m)); ++m)
        std::remove(member_path(dir, name, m).c_str());
}

int cmd_export_lhapdf(const std::vector<std::string>& args, const MpiContext& ctx) {
    po::options_description desc(kLhapdfUsage);
    std::string source, target;
    double qmax = 1e4;
    std::string set_index_text;
    desc.add_options()("help,h", "this text")("output,o", po::value<std::string>(&target), "DIR/NAME (required)")(
        "qmax", po::value<double>(&qmax), "largest Q in GeV (default 1e4)")(
        "set-index", po::value<std::string>(&set_index_text),
        "the set's LHAPDF ID (SetIndex), 0..99999999 (default: [lhapdf] set_index of the fit's config)")(
        "overwrite", "replace existing files")(
        "file", po::value<std::string>(&source), "the fit's result file");
    po::positional_options_description pos;
    pos.add("file", 1);
    po::variables_map vm;
    if (!parse_program_options("export lhapdf", args, desc, pos, vm, ctx)) return 0;
    if (source.empty() || target.empty()) throw usage_error("export lhapdf: usage: ensemblefit export lhapdf FILE.h5 -o DIR/NAME");
    long long set_index = -1;  // none
    if (vm.count("set-index"))
        set_index = ini::to_integer(set_index_text, "export lhapdf: --set-index", 0, kMaxLhapdfSetIndex);
    if (!ctx.is_root()) return 0;
    if (!file_exists(source)) throw usage_error(source + ": no such file");
    const ResultsContent c = read_results(source);
    if (c.id.canonical_config.find("name = dis-mellin") == std::string::npos)
        throw usage_error("export lhapdf: " + source + " is not a dis-mellin fit");
    const DisMellinSettings s = dis_mellin_settings_of(source, c.id.canonical_config, c.id.param_names);
    if (!vm.count("set-index")) set_index = stored_set_index(source, c.id.resolved_config);
    if (!(qmax > s.q0) || !(qmax <= 1e6))  // 1e6 GeV: about 170 Q knots; an infinite one never ends
        throw usage_error("export lhapdf: --qmax must exceed Q0 = " + std::to_string(s.q0) + " GeV and be at most 1e6 GeV");
    const std::string name = target.substr(target.find_last_of('/') + 1);
    const std::string dir = target;
    const bool overwrite = vm.count("overwrite") > 0;
    const std::size_t converged = static_cast<std::size_t>(std::count(c.replicas.status.begin(), c.replicas.status.end(), 0));
    if (converged == 0) throw data_error("export lhapdf: " + source + " has no converged replica");
    check_set(dir, name, converged + 1, overwrite, source);
    const std::vector<double> x = x_knots();
    const std::vector<double> xe(x.begin(), x.end() - 1);
    const auto blocks = q_blocks(s, qmax);
    std::vector<DisPdfEvaluator> eval;
    for (const auto& b : blocks) {
        std::vector<double> q2;
        for (double q : b) q2.push_back(q * q);
        eval.emplace_back(s, xe, q2);
    }
    const std::size_t P = static_cast<std::size_t>(c.replicas.P);
    std::vector<std::vector<std::vector<double>>> members(1);  // [member][block][values]
    for (std::size_t r = 0; r < c.replicas.size(); ++r) {
        if (c.replicas.status[r] != 0) continue;
        std::vector<std::vector<double>> m;
        for (const auto& e : eval) m.push_back(e.values(c.replicas.params.data() + r * P));
        members.push_back(m);
    }
    if (members.size() < 2) throw data_error("export lhapdf: " + source + " has no converged replica");
    members[0] = members[1];
    for (std::size_t b = 0; b < blocks.size(); ++b)
        for (std::size_t k = 0; k < members[0][b].size(); ++k) {
            double sum = 0.0;
            for (std::size_t m = 1; m < members.size(); ++m) sum += members[m][b][k];
            members[0][b][k] = sum / static_cast<double>(members.size() - 1);
        }
    write_set(dir, name, x, blocks, members, info_text(s, members.size(), blocks, source, set_index), overwrite);
    std::fprintf(stderr, "export lhapdf: %s/%s: %zu members (0 = mean of %zu replicas), %zu subgrids\n", dir.c_str(),
                 name.c_str(), members.size(), members.size() - 1, blocks.size());
    return 0;
}

const CommandRegistrar reg("export lhapdf", "a dis-mellin fit as an LHAPDF 6 set (.info + one .dat per member)",
                           &cmd_export_lhapdf);

}  // namespace
}  // namespace ef
