// SPDX-License-Identifier: MIT
#include "src/report/kernel_roofline.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

#include <ensemblefit/worker/device_probe.hpp>

#include "kernels/core/kernel_tally.hpp"

namespace ef {

std::vector<KernelSum> gather_kernel_sums(const MpiContext& ctx, const KernelTally* tally, bool gpu) {
    std::ostringstream os;
    os.precision(17);
    if (tally)  // one line per phase: gpu seconds flops bytes items calls name (the name last: it has spaces)
        for (const KernelTally::Entry& e : tally->entries())
            os << (gpu ? 1 : 0) << ' ' << e.seconds << ' ' << e.flops << ' ' << e.bytes << ' ' << e.items << ' '
               << e.calls << ' ' << e.name << '\n';
    std::vector<KernelSum> out;
    for (const std::string& text : ctx.gather(os.str())) {
        std::istringstream is(text);
        KernelSum k;
        int g = 0;
        while (is >> g >> k.seconds >> k.flops >> k.bytes >> k.items >> k.calls) {
            is.get();
            std::getline(is, k.name);
            k.gpu = g != 0;
            auto it = std::find_if(out.begin(), out.end(), [&](const KernelSum& o) { return o.name == k.name && o.gpu == k.gpu; });
            if (it == out.end()) {
                k.ranks = 1;
                out.push_back(k);
                continue;
            }
            it->seconds += k.seconds;
            it->flops += k.flops;
            it->bytes += k.bytes;
            it->items += k.items;
            it->calls += k.calls;
            it->ranks += 1;
        }
    }
    return out;
}

Ceilings gpu_ceilings(const MpiContext& ctx, int device, bool single_precision) {
    int me = device >= 0 ? ctx.rank() : ctx.size(), first = 0;
    EF_MPI_CHECK(MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, ctx.world()));
    Ceilings c;
    if (first >= ctx.size()) return c;
    double v[2] = {0, 0};
    std::string name;
    if (ctx.rank() == first) {
        const DeviceInfo d = probe_ceilings(device);
        v[0] = (single_precision ? d.fp32_tflops : d.fp64_tflops) * 1e12;
        v[1] = d.device_bandwidth_gbs * 1e9;
        name = d.name;
    }
    EF_MPI_CHECK(MPI_Bcast(v, 2, MPI_DOUBLE, first, ctx.world()));
    c.flops = v[0];
    c.bytes = v[1];
    c.device = name;
    return c;
}

DeviceTimes gather_device_seconds(const MpiContext& ctx, const KernelTally* tally, bool gpu, double transfers) {
    const double mine[2] = {gpu && tally ? tally->seconds() : -1.0, gpu ? transfers : 0.0};
    std::vector<double> all(ctx.is_root() ? 2 * static_cast<size_t>(ctx.size()) : 0);
    EF_MPI_CHECK(MPI_Gather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, 0, ctx.world()));
    DeviceTimes t;
    for (size_t r = 0; 2 * r < all.size(); ++r) {
        t.kernels.push_back(all[2 * r]);
        t.transfers.push_back(all[2 * r + 1]);
    }
    return t;
}

DeviceSplit device_split(const std::vector<RankTiming>& ranks, const DeviceTimes& device, double runtime,
                         double host_parallel) {
    DeviceSplit s;
    double kernels = 0, busiest = 0, busiest_all = 0, host = 0;
    for (size_t r = 0; r < device.kernels.size() && r < ranks.size(); ++r) {
        const double k = device.kernels[r];
        if (k < 0) continue;
        ++s.gpu_ranks;
        kernels += k;
        busiest = std::max(busiest, k);
        busiest_all = std::max(busiest_all, k + device.transfers[r]);
        host += ranks[r].phase[static_cast<size_t>(Phase::compute)];
    }
    if (s.gpu_ranks == 0) return s;
    s.host_parallel = host_parallel;
    s.offload = host > 0 ? std::min(1.0, kernels / host) : 0.0;
    s.device_load_balance = busiest > 0 ? kernels / s.gpu_ranks / busiest : 0.0;
    s.device_communication = busiest_all > 0 ? busiest / busiest_all : 1.0;
    s.orchestration = runtime > 0 ? std::min(1.0, busiest_all / runtime) : 0.0;
    return s;
}

void write_device_split(h5::File& f, const std::vector<std::string>& groups, const DeviceSplit& s) {
    for (const std::string& g : groups) {
        f.set_attr(g, "host_parallel_efficiency", s.host_parallel);
        f.set_attr(g, "device_offload_efficiency", s.offload);
        f.set_attr(g, "host_efficiency", s.host());
        f.set_attr(g, "device_load_balance", s.device_load_balance);
        f.set_attr(g, "device_communication_efficiency", s.device_communication);
        f.set_attr(g, "device_orchestration_efficiency", s.orchestration);
        f.set_attr(g, "device_parallel_efficiency", s.device());
    }
}

std::string format_device_split(const DeviceSplit& s) {
    char b[512];
    std::snprintf(b, sizeof b,
                  "  host/device split (%d GPU rank%s; the two sides are not multiplied together):\n"
                  "    host:   MPI parallel efficiency %.3f x device offload efficiency %.3f = %.3f\n"
                  "    device: load balance %.3f x communication %.3f x orchestration %.3f = parallel efficiency %.3f\n",
                  s.gpu_ranks, s.gpu_ranks == 1 ? "" : "s", s.host_parallel, s.offload, s.host(), s.device_load_balance,
                  s.device_communication, s.orchestration, s.device());
    return b;
}

std::string kernel_row_name(const KernelSum& s) {
    std::string n = s.gpu ? "gpu_" : "";
    for (char ch : s.name) {
        if (std::isalnum(static_cast<unsigned char>(ch))) n += ch;
        else if (!n.empty() && n.back() != '_') n += '_';
    }
    while (!n.empty() && n.back() == '_') n.pop_back();
    return n.empty() ? "phase" : n;
}

KernelRecord kernel_record(const KernelSum& s, const Ceilings& gpu) {
    KernelRecord k;
    k.name = kernel_row_name(s);
    k.seconds = s.seconds;
    k.flops = s.flops;
    k.bytes = s.bytes;
    if (s.gpu) {
        k.ceiling_flops = gpu.flops;
        k.ceiling_bytes = gpu.bytes;
    }
    return k;
}

double KernelRecord::fraction() const {
    double bound = 0;
    if (ceiling_flops > 0 && flops > 0)
        bound = ceiling_bytes > 0 && bytes > 0 ? std::min(ceiling_flops, intensity() * ceiling_bytes) : ceiling_flops;
    else if (ceiling_bytes > 0 && bytes > 0)
        return byte_rate() / ceiling_bytes;
    return bound > 0 ? flop_rate() / bound : 0.0;
}

void write_kernels(h5::File& f, const std::vector<std::string>& groups, const std::vector<KernelRecord>& kernels) {
    for (const std::string& g : groups) {
        const std::string base = g + "/kernels";
        if (!f.exists(base)) f.create_group(base);
        for (const KernelRecord& k : kernels) {
            const std::string at = base + "/" + k.name;
            if (!f.exists(at)) f.create_group(at);
            f.set_attr(at, "what", k.what);
            f.set_attr(at, "flops", k.flops);
            f.set_attr(at, "bytes", k.bytes);
            f.set_attr(at, "seconds", k.seconds);
            f.set_attr(at, "achieved_flops_per_second", k.flop_rate());
            f.set_attr(at, "achieved_bytes_per_second", k.byte_rate());
            f.set_attr(at, "arithmetic_intensity", k.intensity());
            f.set_attr(at, "ceiling_flops_per_second", k.ceiling_flops);
            f.set_attr(at, "ceiling_bytes_per_second", k.ceiling_bytes);
            f.set_attr(at, "fraction_of_ceiling", k.fraction());
        }
    }
}

std::vector<KernelRecord> read_kernels(const h5::File& f, const std::string& group) {
    std::vector<KernelRecord> out;
    const std::string base = group + "/kernels";
    if (!f.exists(base)) return out;
    for (const std::string& name : f.list(base)) {
        const std::string at = base + "/" + name;
        KernelRecord k;
        k.name = name;
        k.what = f.has_attr(at, "what") ? f.attr_string(at, "what") : "";
        k.flops = f.attr_double(at, "flops");
        k.bytes = f.attr_double(at, "bytes");
        k.seconds = f.attr_double(at, "seconds");
        k.ceiling_flops = f.attr_double(at, "ceiling_flops_per_second");
        k.ceiling_bytes = f.attr_double(at, "ceiling_bytes_per_second");
        out.push_back(k);
    }
    return out;
}

std::string format_kernels(const std::vector<KernelRecord>& kernels) {
    std::string s;
    char b[512];
    std::snprintf(b, sizeof b, "  %-24s %11s %11s %9s %10s %9s %9s %9s  %s\n", "kernel", "FLOP", "bytes", "seconds",
                  "GFLOP/s", "GB/s", "FLOP/B", "fraction", "counts");
    s += b;
    for (const KernelRecord& k : kernels) {
        char frac[16] = "n/a";
        if (k.ceiling_flops > 0 || k.ceiling_bytes > 0) std::snprintf(frac, sizeof frac, "%.3f", k.fraction());
        std::snprintf(b, sizeof b, "  %-24s %11.4g %11.4g %9.3f %10.4g %9.4g %9.4g %9s  %s\n", k.name.c_str(), k.flops,
                      k.bytes, k.seconds, k.flop_rate() / 1e9, k.byte_rate() / 1e9, k.intensity(), frac, k.what.c_str());
        s += b;
    }
    return s;
}

}  // namespace ef
