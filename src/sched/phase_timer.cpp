// SPDX-License-Identifier: MIT
#include <ensemblefit/sched/phase_timer.hpp>

namespace ef {

const char* to_string(Phase p) {
    switch (p) {
        case Phase::setup: return "setup";
        case Phase::compute: return "compute";
        case Phase::comm: return "comm";
        case Phase::sync: return "sync";
        case Phase::sched: return "sched";
        case Phase::idle: return "idle";
        case Phase::io: return "io";
        default: return "?";
    }
}

}  // namespace ef
