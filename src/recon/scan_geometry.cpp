// SPDX-License-Identifier: MIT
#include "src/recon/scan_geometry.hpp"

#include <cmath>
#include <fstream>
#include <sstream>

#include <ensemblefit/core/error.hpp>

#include "src/core/text.hpp"

namespace ef {

std::vector<double> raster_positions(const ScanGeometry& scan) {
    const double t = scan.rotation_deg * M_PI / 180.0, c = std::cos(t), s = std::sin(t);
    std::vector<double> pos;
    pos.reserve(2 * static_cast<size_t>(scan.ny) * static_cast<size_t>(scan.nx));
    for (int r = 0; r < scan.ny; ++r)
        for (int k = 0; k < scan.nx; ++k) {
            double y = r * scan.step_y, x = k * scan.step_x;
            if (scan.transpose) std::swap(y, x);
            if (scan.flip_y) y = -y;
            if (scan.flip_x) x = -x;
            pos.push_back(y * c - x * s);
            pos.push_back(y * s + x * c);
        }
    return pos;
}

std::vector<double> read_position_list(const std::string& path, double scale) {
    std::ifstream in(path);
    if (!in) throw data_error(path + ": cannot open the positions file (data.positions)");
    std::vector<double> pos;
    std::string line;
    for (int no = 1; std::getline(in, line); ++no) {
        const std::string t = trim(line);
        if (t.empty() || t[0] == '#') continue;
        std::istringstream is(t);
        double y = 0, x = 0;
        std::string extra;
        if (!(is >> y >> x) || (is >> extra) || !std::isfinite(y) || !std::isfinite(x))
            throw data_error(path + ":" + std::to_string(no) + ": expected two numbers 'y x', got '" + excerpt(t) + "'");
        pos.push_back(y * scale);
        pos.push_back(x * scale);
    }
    if (pos.empty()) throw data_error(path + ": no positions (data.positions: one 'y x' line per frame)");
    return pos;
}

}  // namespace ef
