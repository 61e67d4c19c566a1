// SPDX-License-Identifier: MIT
#include <ensemblefit/report/timing_report.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace ef {

PopMetrics pop_metrics(const std::vector<RankTiming>& ranks) {
    PopMetrics m;
    m.ranks = static_cast<int>(ranks.size());
    if (ranks.empty()) return m;
    const size_t c = static_cast<size_t>(Phase::compute);
    const size_t k = static_cast<size_t>(Phase::comm);
    double sum_c = 0, max_c = 0, sum_comm = 0;
    for (const auto& r : ranks) {
        sum_c += r.phase[c];
        max_c = std::max(max_c, r.phase[c]);
        sum_comm += r.phase[k];
        m.runtime = std::max(m.runtime, r.wall);
    }
    const double n = static_cast<double>(ranks.size());
    m.load_balance = max_c > 0 ? (sum_c / n) / max_c : 1.0;
    m.communication_efficiency = m.runtime > 0 ? max_c / m.runtime : 1.0;
    m.parallel_efficiency = m.load_balance * m.communication_efficiency;
    m.transfer_efficiency = m.runtime > 0 ? (m.runtime - sum_comm / n) / m.runtime : 1.0;
    m.serialization_efficiency =
        m.transfer_efficiency > 0 ? m.communication_efficiency / m.transfer_efficiency : 1.0;
    return m;
}

void apply_baseline(PopMetrics& m, const std::vector<RankTiming>& now, const std::vector<RankTiming>& base,
                    double base_runtime) {
    const size_t c = static_cast<size_t>(Phase::compute);
    double now_c = 0, base_c = 0;
    for (const auto& r : now) now_c += r.phase[c];
    for (const auto& r : base) base_c += r.phase[c];
    m.computation_scalability = now_c > 0 ? base_c / now_c : 0.0;
    m.global_efficiency = m.parallel_efficiency * m.computation_scalability;
    m.speedup = m.runtime > 0 ? base_runtime / m.runtime : 0.0;
}

std::string format_timing_table(const std::vector<RankTiming>& ranks, const PopMetrics& m,
                                const TimingColumns& columns) {
    std::ostringstream os;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "\ntiming: %d rank(s), runtime %.3f s; load balance %.3f x communication efficiency "
                  "%.3f = parallel efficiency %.3f\n",
                  m.ranks, m.runtime, m.load_balance, m.communication_efficiency, m.parallel_efficiency);
    os << buf;
    if (m.speedup > 0) {
        std::snprintf(buf, sizeof buf,
                      "  vs baseline: speedup %.3f, computation scalability %.3f, global efficiency %.3f\n",
                      m.speedup, m.computation_scalability, m.global_efficiency);
        os << buf;
    }
    // Count columns as wide as their names (at least 5), then the problem's own columns.
    const std::string count_names[4] = {columns.items, columns.units, columns.calls, columns.bytes};
    os << "  rank ";
    for (int p = 0; p < kPhaseCount; ++p) {
        std::snprintf(buf, sizeof buf, " %8s", to_string(static_cast<Phase>(p)));
        os << buf;
    }
    os << " " << std::string(8 - 4, ' ') << "wall";
    for (const std::string& n : count_names) os << " " << std::string(n.size() < 5 ? 5 - n.size() : 0, ' ') << n;
    for (const std::string& n : columns.extra) os << " " << std::string(n.size() < 9 ? 9 - n.size() : 0, ' ') << n;
    os << "\n";
    for (const RankTiming& r : ranks) {
        std::snprintf(buf, sizeof buf, "  %-5zu", static_cast<size_t>(&r - ranks.data()));
        os << buf;
        for (double s : r.phase) {
            std::snprintf(buf, sizeof buf, " %8.3f", s);
            os << buf;
        }
        std::snprintf(buf, sizeof buf, " %8.3f", r.wall);
        os << buf;
        const std::int64_t counts[4] = {r.replicas, r.units, r.mpi_calls, r.mpi_bytes};
        for (int k = 0; k < 4; ++k) {
            std::snprintf(buf, sizeof buf, " %*lld", static_cast<int>(std::max<size_t>(5, count_names[k].size())),
                          static_cast<long long>(counts[k]));
            os << buf;
        }
        for (size_t k = 0; k < columns.extra.size() && k < r.extra.size(); ++k) {
            std::snprintf(buf, sizeof buf, " %*.4g", static_cast<int>(std::max<size_t>(9, columns.extra[k].size())),
                          r.extra[k]);
            os << buf;
        }
        os << "\n";
    }
    return os.str();
}

namespace {
std::string jstr(const std::string& s) {
    std::string o = "\"";
    for (char ch : s) {
        if (ch == '"' || ch == '\\') o += '\\';
        if (ch == '\t') {
            o += "\\t";
            continue;
        }
        if (ch == '\n') {
            o += "\\n";
            continue;
        }
        o += ch;
    }
    return o + "\"";
}
std::string jnum(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.9g", v);
    return b;
}
}  // namespace

std::string timing_json(const std::vector<RankTiming>& ranks, const PopMetrics& m,
                        const std::vector<std::string>& placement, const std::string& extra,
                        const TimingColumns& columns) {
    std::ostringstream os;
    os << "{\n  \"ranks\": " << m.ranks << ",\n  \"runtime_seconds\": " << jnum(m.runtime)
       << ",\n  \"metrics\": {\"load_balance\": " << jnum(m.load_balance)
       << ", \"communication_efficiency\": " << jnum(m.communication_efficiency)
       << ", \"parallel_efficiency\": " << jnum(m.parallel_efficiency)
       << ", \"transfer_efficiency\": " << jnum(m.transfer_efficiency)
       << ", \"serialization_efficiency\": " << jnum(m.serialization_efficiency) << "},\n";
    if (!extra.empty()) os << extra << ",\n";
    os << "  \"per_rank\": [\n";
    for (size_t r = 0; r < ranks.size(); ++r) {
        os << "    {\"rank\": " << r;
        for (int p = 0; p < kPhaseCount; ++p)
            os << ", \"" << to_string(static_cast<Phase>(p)) << "\": " << jnum(ranks[r].phase[static_cast<size_t>(p)]);
        os << ", \"wall\": " << jnum(ranks[r].wall) << ", " << jstr(columns.items) << ": " << ranks[r].replicas
           << ", " << jstr(columns.units) << ": " << ranks[r].units << ", " << jstr(columns.calls) << ": "
           << ranks[r].mpi_calls << ", " << jstr(columns.bytes) << ": " << ranks[r].mpi_bytes;
        for (size_t k = 0; k < columns.extra.size() && k < ranks[r].extra.size(); ++k)
            os << ", " << jstr(columns.extra[k]) << ": " << jnum(ranks[r].extra[k]);
        if (r < placement.size()) os << ", \"placement\": " << jstr(placement[r]);
        os << "}" << (r + 1 < ranks.size() ? "," : "") << "\n";
    }
    os << "  ]\n}\n";
    return os.str();
}

}  // namespace ef
