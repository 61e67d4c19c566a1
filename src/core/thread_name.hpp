// SPDX-License-Identifier: MIT
#pragma once

#include <string>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace ef {

/**
 * Names the calling thread, as its first act: top -H, ps -L, gdb, perf and /proc/PID/task/TID/comm
 * then tell ensemblefit's threads apart (ef-dispatch, ef-writer, ef-checksum, ef-gpu-context,
 * ef-omp-N) instead of showing every one as `ensemblefit`. Linux keeps 15 characters; a longer
 * name is cut. A name is a convenience: a failure is ignored.
 */
inline void name_this_thread(const std::string& name) {
#if defined(__linux__)
    (void)pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
#else
    (void)name;
#endif
}

}  // namespace ef
