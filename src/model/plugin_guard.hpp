// SPDX-License-Identifier: MIT
#pragma once

#include <string>

namespace ef {

/**
 * A model plugin is foreign code that runs inside every rank: its library's constructors when it
 * is opened, its model on every fit and prediction. From the first plugin opened on, a signal of
 * a crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL) ends the process with one line,
 * "ensemblefit: error: the model plugin 'NAME' (PATH) crashed: SIGSEGV; the run stops", written
 * with write(2), and _exit(4) (docs/architecture.md, "Errors and exit codes"), instead of a bare
 * signal and Open MPI's banner. Ranks other than 0 wait a moment before they write, so that when
 * every rank crashes (a constructor) the launcher ends them after rank 0's line: one line. The
 * text is prepared here, outside the handler; `what` names the plugin (its path before its table
 * is read, then "NAME' (PATH").
 */
void guard_plugin_crashes(const std::string& what);

}  // namespace ef
