// SPDX-License-Identifier: MIT
#include "src/report/kernel_roofline.hpp"

#include <algorithm>
#include <cstdio>

namespace ef {

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
    std::snprintf(b, sizeof b, "  %-10s %11s %11s %9s %10s %9s %9s %9s  %s\n", "kernel", "FLOP", "bytes", "seconds",
                  "GFLOP/s", "GB/s", "FLOP/B", "fraction", "counts");
    s += b;
    for (const KernelRecord& k : kernels) {
        char frac[16] = "n/a";
        if (k.ceiling_flops > 0 || k.ceiling_bytes > 0) std::snprintf(frac, sizeof frac, "%.3f", k.fraction());
        std::snprintf(b, sizeof b, "  %-10s %11.4g %11.4g %9.3f %10.4g %9.4g %9.4g %9s  %s\n", k.name.c_str(), k.flops,
                      k.bytes, k.seconds, k.flop_rate() / 1e9, k.byte_rate() / 1e9, k.intensity(), frac, k.what.c_str());
        s += b;
    }
    return s;
}

}  // namespace ef
