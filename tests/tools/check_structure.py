#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The layering and size rules of docs/architecture.md, checked on the source tree.

- kernels/ includes nothing from src/; kernels/cuda nothing from kernels/cpu (and back);
- src/fit and src/recon include nothing of each other (nor of each other's public headers);
- getenv only in src/run/environment.cpp (the one settings file of the program);
- no include arrow points up: the shared floor (core, comm, config, io, model, report, sched,
  worker, run) includes nothing of a problem (fit, recon) or of the CLI, and a problem nothing
  of the CLI (KNOWN_UP lists the arrows still to be moved, each with its reason);
- the run order belongs to RunSession: fit and recon call none of the run layer's steps
  (settings, placement, output guard, timing; RUN_STEPS), and the [run] keys are parsed only in
  src/run (a config names them in its key table, nothing more);
- no function in src/ longer than 80 lines, and the run's order (RunSession::run), run_fit and
  the reconstruction's iterate under 60.

Function lengths come from a brace scan with comments and literals removed: a block opened at
namespace or class scope by a header that ends in a parameter list (optionally with const,
noexcept, override, a trailing return type or a constructor's initialisers) is a function, and
its lines from that header's line to its closing brace are counted. Lambdas and blocks inside a
function count towards that function.

Usage: check_structure.py ROOT   (exit 0 when every rule holds; one line per violation)
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
MAX_LINES = 80
RUN_FUNCTIONS = {"run_fit": 60, "RunSession::run": 60, "Reconstruction::iterate": 60}
SOURCE_EXT = (".cpp", ".hpp", ".cu", ".cuh", ".h")
GETENV_ALLOWED = {"src/run/environment.cpp"}

violations = []


def files_under(folder):
    base = os.path.join(ROOT, folder)
    for dirpath, _, names in os.walk(base):
        for n in sorted(names):
            if n.endswith(SOURCE_EXT):
                full = os.path.join(dirpath, n)
                yield os.path.relpath(full, ROOT), open(full, encoding="utf-8", errors="replace").read()


def strip_code(text):
    """Comments, string and character literals blanked out; newlines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + (m.group(1) if m else "") + '"', i)
            end = n if end < 0 else end + len(m.group(1) if m else "") + 2
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|try|namespace|class|struct|union|enum|extern|return)\b")
FUNC_TAIL = re.compile(r"\)\s*(const\s*)?(noexcept\s*(\([^)]*\))?\s*)?(override\s*|final\s*)*(->\s*[\w:<>,\s*&]+)?\s*$")


def function_name(header):
    head = header.split("(")[0].strip()
    m = re.search(r"([\w:~]+(?:operator\s*\S+)?)\s*$", head)
    return m.group(1) if m else head


def scan_functions(path, text):
    code = strip_code(text)
    stack = []  # (kind, name, start_line)
    header, header_line, line = "", 1, 1
    for ch in code:
        if ch == "\n":
            line += 1
            header += " "
            continue
        if ch == "{":
            h = header.strip()
            in_function = any(k == "function" for k, _, _ in stack)
            if in_function:
                stack.append(("block", "", line))
            elif h.startswith("#"):
                stack.append(("block", "", line))
            else:
                # constructor initialisers: "X(args) : a_(b), c_{d}" -- judge the part before " : "
                candidate = re.split(r"\)\s*:(?!:)", h, maxsplit=1)
                looks = (FUNC_TAIL.search(h) or len(candidate) == 2) and "(" in h and not CONTROL.match(h) \
                    and not h.rstrip().endswith("=") and "=" not in h.split("(")[0]
                if looks:
                    stack.append(("function", function_name(candidate[0] + ")"), header_line))
                else:
                    stack.append(("scope", "", line))
            header, header_line = "", line
        elif ch == "}":
            if stack:
                kind, name, start = stack.pop()
                if kind == "function":
                    yield name, start, line
            header, header_line = "", line
        elif ch == ";":
            header, header_line = "", line
        else:
            if not header.strip():
                header_line = line
            header += ch


def check_lengths():
    for path, text in files_under("src"):
        for name, start, end in scan_functions(path, text):
            lines = end - start + 1
            limit = MAX_LINES
            for fn, lim in RUN_FUNCTIONS.items():
                if name == fn or name.endswith("::" + fn) or (name == fn.split("::")[-1] and fn.split("::")[0] in text):
                    limit = min(limit, lim) if name.split("::")[-1] == fn.split("::")[-1] else limit
            if lines > limit:
                violations.append(f"{path}:{start}: function {name} is {lines} lines (at most {limit})")


INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)


def check_includes():
    rules = [
        ("kernels/", r"^src/", "kernels/ includes nothing from src/"),
        ("kernels/cuda/", r"^kernels/cpu/", "kernels/cuda includes nothing from kernels/cpu"),
        ("kernels/cpu/", r"^kernels/cuda/", "kernels/cpu includes nothing from kernels/cuda"),
        ("src/recon/", r"^(src/fit/|ensemblefit/fit/)", "src/recon includes nothing from the fit"),
        ("src/fit/", r"^(src/recon/|ensemblefit/recon/)", "src/fit includes nothing from the reconstruction"),
        ("include/ensemblefit/recon/", r"^ensemblefit/fit/", "recon headers include nothing from the fit"),
        ("include/ensemblefit/fit/", r"^ensemblefit/recon/", "fit headers include nothing from the reconstruction"),
    ]
    for folder in ("src", "kernels", "include"):
        for path, text in files_under(folder):
            for inc in INCLUDE.findall(text):
                for prefix, bad, rule in rules:
                    if path.startswith(prefix) and re.match(bad, inc):
                        violations.append(f"{path}: includes {inc} ({rule})")


def check_getenv():
    for folder in ("src", "kernels"):
        for path, text in files_under(folder):
            if path in GETENV_ALLOWED:
                continue
            code = strip_code(text)
            for k, l in enumerate(code.split("\n"), 1):
                if re.search(r"\b(secure_)?getenv\s*\(", l):
                    violations.append(f"{path}:{k}: getenv outside src/run/environment.cpp")


SHARED_FLOOR = {"core", "comm", "config", "io", "model", "report", "sched", "worker", "run"}
PROBLEMS = {"fit", "recon"}
# Arrows up that remain, with why; the list only shrinks.
KNOWN_UP = {
    ("src/io/central_errors.hpp", "ensemblefit/fit/fit_problem.hpp"):
        "the fit's /central covariance inputs, housed beside the results file",
    ("src/model/model_factory.cpp", "ensemblefit/fit/fit_problem.hpp"): "make_fit_problem lives with the models",
}


def floor_of(path):
    parts = path.split("/")
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    if parts[0] == "include" and len(parts) > 3:
        return parts[2]
    return None


def check_floors():
    for folder in ("src", "include"):
        for path, text in files_under(folder):
            mine = floor_of(path)
            if mine is None:
                continue
            for inc in INCLUDE.findall(text):
                m = re.match(r"^(?:src|ensemblefit)/(\w+)/", inc)
                if not m or m.group(1) == mine:
                    continue
                theirs = m.group(1)
                up = (mine in SHARED_FLOOR and (theirs in PROBLEMS or theirs == "cli")) or \
                    (mine in PROBLEMS and theirs == "cli")
                if up and (path, inc) not in KNOWN_UP:
                    violations.append(f"{path}: includes {inc} (an arrow up: {mine} is below {theirs})")


# The run layer's steps: only src/run orders them (RunSession); src/cli's other commands
# (pdf, predict) use the output guard and threads on their own.
RUN_STEPS = re.compile(r"\b(check_output|gather_placement|apply_binding|resolve_threads|choose_device|gather_timing|"
                       r"report_run_timing|parse_run_settings|write_timing)\s*\(")
RUN_STEPS_ALLOWED = {
    ("src/recon/simulate_ptycho.cpp", "resolve_threads"): "the simulate command's threads, not a run",
    ("src/config/fit_config.cpp", "parse_run_settings"): "hands [run] to the run layer",
    ("src/recon/recon_config.cpp", "parse_run_settings"): "hands [run] to the run layer",
}
RUN_KEY = re.compile(r'"run\.(workers|threads|bind|heartbeat_timeout)"')


def check_run_order():
    for folder in ("src/fit", "src/recon", "src/config"):
        for path, text in files_under(folder):
            code = strip_code(text)
            for k, l in enumerate(code.split("\n"), 1):
                for m in RUN_STEPS.finditer(l):
                    if (path, m.group(1)) not in RUN_STEPS_ALLOWED:
                        violations.append(f"{path}:{k}: calls {m.group(1)} (a step of the run order: RunSession's, "
                                          "src/run/run_session.cpp)")
            for k, l in enumerate(text.split("\n"), 1):
                for m in RUN_KEY.finditer(l):
                    if not re.match(r"\s*\{\s*$", l[:m.start()]):
                        violations.append(f"{path}:{k}: reads [run] {m.group(1)} (parsed only in src/run/run_settings.cpp)")


check_includes()
check_floors()
check_run_order()
check_getenv()
check_lengths()
for v in violations:
    print(v)
print(f"structure: {len(violations)} violation(s)")
sys.exit(1 if violations else 0)
