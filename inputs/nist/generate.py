#!/usr/bin/python3
"""Generate ensemblefit inputs for the 27 NIST StRD nonlinear regression problems.

Usage:
    /usr/bin/python3 generate.py NIST_DIR [--out DIR] [--check]

NIST_DIR holds NIST's .dat files, one per problem, as published at
https://www.itl.nist.gov/div898/strd/nls/nls_main.shtml; DIR defaults to the
folder of this script. For each problem NAME it writes NAME.csv, NAME.start1.ini,
NAME.start2.ini, and certified.csv for all problems.

With --check, nothing is written: every translated formula is evaluated (in Python, with ^
replaced by **) at the certified parameter values on the data, and the residual sum of squares
is compared with NIST's certified value. The exit status is 1 if any problem does not match.

Only the standard library is needed to generate; --check uses numpy.
"""

import argparse
import math
import os
import re
import sys

# NIST model text -> ensemblefit formula syntax, translated by hand from each .dat's Model
# section. Syntax: numbers, b1..bN, x (x1, x2 for Nelson), pi, + - * / ^ (right-assoc, binds
# tighter than unary minus), parentheses, exp log sqrt sin cos tan atan abs pow(a,b).
# NIST's [..] brackets become (..), ** becomes ^, arctan becomes atan, .5 becomes 0.5.
FORMULAS = {
    "Bennett5": "b1*(b2+x)^(-1/b3)",
    "BoxBOD": "b1*(1-exp(-b2*x))",
    "Chwirut1": "exp(-b1*x)/(b2+b3*x)",
    "Chwirut2": "exp(-b1*x)/(b2+b3*x)",
    "DanWood": "b1*x^b2",
    "ENSO": "b1 + b2*cos(2*pi*x/12) + b3*sin(2*pi*x/12)"
            " + b5*cos(2*pi*x/b4) + b6*sin(2*pi*x/b4)"
            " + b8*cos(2*pi*x/b7) + b9*sin(2*pi*x/b7)",
    "Eckerle4": "(b1/b2)*exp(-0.5*((x-b3)/b2)^2)",
    "Gauss1": "b1*exp(-b2*x) + b3*exp(-(x-b4)^2/b5^2) + b6*exp(-(x-b7)^2/b8^2)",
    "Gauss2": "b1*exp(-b2*x) + b3*exp(-(x-b4)^2/b5^2) + b6*exp(-(x-b7)^2/b8^2)",
    "Gauss3": "b1*exp(-b2*x) + b3*exp(-(x-b4)^2/b5^2) + b6*exp(-(x-b7)^2/b8^2)",
    "Hahn1": "(b1+b2*x+b3*x^2+b4*x^3)/(1+b5*x+b6*x^2+b7*x^3)",
    "Kirby2": "(b1+b2*x+b3*x^2)/(1+b4*x+b5*x^2)",
    "Lanczos1": "b1*exp(-b2*x) + b3*exp(-b4*x) + b5*exp(-b6*x)",
    "Lanczos2": "b1*exp(-b2*x) + b3*exp(-b4*x) + b5*exp(-b6*x)",
    "Lanczos3": "b1*exp(-b2*x) + b3*exp(-b4*x) + b5*exp(-b6*x)",
    "MGH09": "b1*(x^2+x*b2)/(x^2+x*b3+b4)",
    "MGH10": "b1*exp(b2/(x+b3))",
    "MGH17": "b1 + b2*exp(-x*b4) + b3*exp(-x*b5)",
    "Misra1a": "b1*(1-exp(-b2*x))",
    "Misra1b": "b1*(1-(1+b2*x/2)^(-2))",
    "Misra1c": "b1*(1-(1+2*b2*x)^(-0.5))",
    "Misra1d": "b1*b2*x*((1+b2*x)^(-1))",
    # NIST: log[y] = b1 - b2*x1 * exp[-b3*x2]; fitted against the logy column of Nelson.csv.
    "Nelson": "b1 - b2*x1*exp(-b3*x2)",
    "Rat42": "b1/(1+exp(b2-b3*x))",
    "Rat43": "b1/((1+exp(b2-b3*x))^(1/b4))",
    "Roszman1": "b1 - b2*x - atan(b3/(x-b4))/pi",
    "Thurber": "(b1+b2*x+b3*x^2+b4*x^3)/(1+b5*x+b6*x^2+b7*x^3)",
}

# Problems whose model is for a transform of y: name -> (new column, function of y).
LOG_RESPONSE = {"Nelson": "logy"}

FUNCTIONS = {"exp", "log", "sqrt", "sin", "cos", "tan", "atan", "abs", "pow"}

_NUM = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[EeDd][+-]?\d+)?"


class ParseError(Exception):
    pass


def parse_dat(path):
    """Parses one NIST StRD nonlinear .dat file; returns a dict. Raises ParseError."""
    name = os.path.splitext(os.path.basename(path))[0]
    with open(path, "r", encoding="ascii", errors="strict", newline=None) as fh:
        lines = [l.rstrip() for l in fh.read().split("\n")]
    prob = {"name": name, "path": path, "warnings": []}

    def fail(msg):
        raise ParseError("%s: %s" % (path, msg))

    # Dataset name line.
    for l in lines[:10]:
        m = re.match(r"^Dataset Name:\s*(\S+)", l)
        if m:
            if m.group(1) != name:
                prob["warnings"].append("Dataset Name %r differs from file name" % m.group(1))
            break
    else:
        prob["warnings"].append("no 'Dataset Name:' line")

    # Difficulty.
    diff = None
    for l in lines:
        m = re.match(r"^\s*(Lower|Average|Higher)\s+Level\s+of\s+Difficulty", l, re.I)
        if m:
            diff = m.group(1).lower()
            break
    if diff is None:
        fail("no 'Level of Difficulty' line")
    prob["difficulty"] = diff

    # Model section: after 'Model:' and the 'N Parameters' line, the first run of non-blank lines.
    mi = next((i for i, l in enumerate(lines) if l.startswith("Model:")), None)
    if mi is None:
        fail("no 'Model:' line")
    npar_declared = None
    model_lines = []
    i = mi + 1
    while i < len(lines):
        l = lines[i].strip()
        m = re.match(r"^(\d+)\s+Parameters?\b", l)
        if m and npar_declared is None:
            npar_declared = int(m.group(1))
        elif l:
            if npar_declared is None:
                fail("model text before the 'N Parameters' line")
            model_lines.append(l)
        elif model_lines:
            break
        i += 1
    if not model_lines:
        fail("empty model text")
    # Drop the error term '+ e' from the last model line.
    model_lines[-1] = re.sub(r"\s*\+\s*e\s*$", "", model_lines[-1])
    prob["model_text"] = model_lines

    # Start 1 / Start 2 / Parameter / Standard Deviation block.
    hi = next((i for i, l in enumerate(lines)
               if re.search(r"Start\s+1\s+Start\s+2\s+Parameter\s+Standard\s+Deviation", l, re.I)),
              None)
    if hi is None:
        fail("no 'Start 1 Start 2 Parameter Standard Deviation' header")
    params = []
    i = hi + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    first_param_line = i + 1  # 1-based
    while i < len(lines):
        l = lines[i]
        m = re.match(r"^\s*(b\d+)\s*=\s*(%s)\s+(%s)\s+(%s)\s+(%s)\s*$" % ((_NUM,) * 4), l)
        if not m:
            break
        params.append({"name": m.group(1), "start1": m.group(2), "start2": m.group(3),
                       "value": m.group(4), "stddev": m.group(5)})
        i += 1
    if not params:
        fail("no parameter lines after the Start header")
    if lines[i].strip() and not lines[i].lstrip().startswith("Residual"):
        fail("unexpected line after the parameter block: %r" % lines[i])
    expected = ["b%d" % (k + 1) for k in range(len(params))]
    if [p["name"] for p in params] != expected:
        fail("parameters are %s, expected %s" % ([p["name"] for p in params], expected))
    if npar_declared is not None and npar_declared != len(params):
        fail("Model says %d parameters, block has %d" % (npar_declared, len(params)))
    prob["params"] = params

    # Residual sum of squares, observations.
    rss = [re.match(r"^\s*Residual Sum of Squares:\s*(%s)\s*$" % _NUM, l) for l in lines]
    rss = [m.group(1) for m in rss if m]
    if len(rss) != 1:
        fail("expected one 'Residual Sum of Squares' line, found %d" % len(rss))
    prob["rss"] = rss[0]
    nobs = [re.match(r"^\s*Number of Observations:\s*(\d+)\s*$", l) for l in lines]
    nobs = [int(m.group(1)) for m in nobs if m]
    nobs = nobs[0] if nobs else None

    # Data section: the 'Data:' line whose rest is a list of column names (the first 'Data:'
    # line of the file describes the variables instead).
    di = None
    for i, l in enumerate(lines):
        m = re.match(r"^Data:\s*(.*)$", l)
        if m:
            toks = m.group(1).split()
            if toks and all(re.match(r"^[A-Za-z_]\w*$", t) for t in toks) \
                    and all(re.match(r"^(y|x\d*)$", t) for t in toks):
                di = i
                cols = toks
    if di is None:
        fail("no 'Data:  y x ...' column header line")
    if cols[0] != "y" or len(cols) < 2 or len(set(cols)) != len(cols):
        fail("unexpected data columns %s (NIST lists y first)" % cols)
    rows = []
    for j in range(di + 1, len(lines)):
        toks = lines[j].split()
        if not toks:
            continue
        if len(toks) != len(cols):
            fail("line %d: %d values for %d columns" % (j + 1, len(toks), len(cols)))
        for t in toks:
            if not re.match(r"^%s$" % _NUM, t):
                fail("line %d: %r is not a number" % (j + 1, t))
        rows.append(toks)
    if nobs is not None and nobs != len(rows):
        fail("Number of Observations says %d, data has %d rows" % (nobs, len(rows)))
    prob["columns"] = cols
    prob["rows"] = rows

    # Cross-check the line numbers NIST gives in the 'File Format' section.
    for l in lines[:12]:
        m = re.match(r"^\s*(Starting Values|Certified Values|Data)\s+\(lines\s+(\d+)\s+to\s+(\d+)\)",
                     l, re.I)
        if not m:
            continue
        what, a, b = m.group(1).lower(), int(m.group(2)), int(m.group(3))
        if what == "data":
            got = (di + 2, max(k + 1 for k in range(len(lines)) if lines[k].strip()))
        elif what == "starting values":
            got = (first_param_line, first_param_line + len(params) - 1)
        else:
            got = (first_param_line, None)
        if got[0] != a or (got[1] is not None and got[1] != b):
            prob["warnings"].append("File Format says %s at lines %d-%d, found %s"
                                    % (what, a, b, got))
    return prob


def xcols(prob):
    return prob["columns"][1:]


def ycol(prob):
    return LOG_RESPONSE.get(prob["name"], "y")


def csv_text(prob):
    name = prob["name"]
    header = xcols(prob) + ["y"]
    logy = name in LOG_RESPONSE
    if logy:
        header.append(LOG_RESPONSE[name])
    out = [",".join(header)]
    for r in prob["rows"]:
        vals = r[1:] + [r[0]]
        if logy:
            vals.append("%.17g" % math.log(float(r[0])))
        out.append(",".join(vals))
    return "\n".join(out) + "\n"


def ini_text(prob, start):
    name = prob["name"]
    base = "%s.start%d" % (name, start)
    out = ["# NIST StRD %s (%s difficulty), start %d" % (name, prob["difficulty"], start)]
    out += ["# " + l for l in prob["model_text"]]
    if name in LOG_RESPONSE:
        out.append("# fitted to %s = log(y), column %s of %s.csv"
                   % (LOG_RESPONSE[name], LOG_RESPONSE[name], name))
    out += ["[data]",
            "file = %s.csv" % name,
            "x = %s" % ", ".join(xcols(prob)),
            "y = %s" % ycol(prob),
            "sigma = 1",
            "",
            "[model]",
            "name = formula",
            "formula = %s" % FORMULAS[name],
            ""]
    for p in prob["params"]:
        out += ["[param.%s]" % p["name"], "start = %s" % p["start%d" % start], ""]
    out += ["[fit]", "replicas = 0", "", "[output]", "file = %s.h5" % base]
    return "\n".join(out) + "\n"


def certified_rows(prob):
    return ["%s,%s,%s,%s,%s" % (prob["name"], p["name"], p["value"], p["stddev"], prob["rss"])
            for p in prob["params"]]


_TOKEN = re.compile(r"\s*(?:(\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_]\w*)"
                    r"|(\*\*|[-+*/^(),]))")


def check_formula_names(prob):
    """Checks that the formula only uses known tokens and exactly the parameters b1..bN."""
    text = FORMULAS[prob["name"]]
    pos, names = 0, []
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            return "bad character at column %d" % (pos + 1)
        if m.group(1) and m.group(1).startswith("."):
            return "number %r without a leading digit" % m.group(1)
        if m.group(2):
            names.append(m.group(2))
        pos = m.end()
    params = [p["name"] for p in prob["params"]]
    allowed = set(params) | set(xcols(prob)) | FUNCTIONS | {"pi"}
    unknown = sorted(set(names) - allowed)
    if unknown:
        return "unknown names %s" % unknown
    unused = [p for p in params if p not in names]
    if unused:
        return "parameters not used: %s" % unused
    return None


def formula_rss(prob, values):
    """Evaluates the formula with numpy at `values` on the csv data; returns the RSS."""
    import numpy as np
    env = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos,
           "tan": np.tan, "atan": np.arctan, "abs": np.abs, "pow": np.power, "pi": math.pi,
           "__builtins__": {}}
    for k, c in enumerate(xcols(prob)):
        env[c] = np.array([float(r[1 + k]) for r in prob["rows"]])
    y = np.array([float(r[0]) for r in prob["rows"]])
    if prob["name"] in LOG_RESPONSE:
        y = np.log(y)
    for p, v in zip(prob["params"], values):
        env[p["name"]] = v
    f = eval(FORMULAS[prob["name"]].replace("^", "**"), env)
    r = y - f
    return math.fsum(float(t) * float(t) for t in r)


def check(probs):
    bad = []
    print("%-9s %4s %3s %22s %22s %11s  %s" % ("problem", "n", "p", "certified RSS",
                                                  "RSS at certified b", "rel diff", "result"))
    for prob in probs:
        err = check_formula_names(prob)
        cert = float(prob["rss"])
        got = formula_rss(prob, [float(p["value"]) for p in prob["params"]])
        rel = abs(got - cert) / cert if cert != 0 else float("inf")
        # RSS ~ 0 (Lanczos1): certified values have 11 digits, so the residuals can only be
        # reproduced to about 1e-11 * |y|; judge those absolutely against the scale of y.
        ysq = sum(float(r[0]) ** 2 for r in prob["rows"])
        tiny = cert < 1e-16 * ysq
        ok = err is None and (abs(got - cert) <= 1e-18 * ysq if tiny else rel <= 1e-6)
        how = "abs" if tiny else "rel"
        status = "ok" if ok else "MISMATCH"
        if err:
            status += " (" + err + ")"
        print("%-9s %4d %3d %22.11e %22.11e %11.2e  %s (%s)"
              % (prob["name"], len(prob["rows"]), len(prob["params"]), cert, got, rel, status, how))
        if not ok:
            bad.append(prob["name"])
    return bad


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("nist_dir",
                    help="folder of NIST's .dat files (https://www.itl.nist.gov/div898/strd/nls/)")
    ap.add_argument("--out", default=here, help="output folder (default: this script's)")
    ap.add_argument("--check", action="store_true",
                    help="check RSS at the certified values instead of writing files")
    args = ap.parse_args(argv)

    files = sorted(f for f in os.listdir(args.nist_dir) if f.endswith(".dat"))
    if not files:
        sys.exit("no .dat files in %s" % args.nist_dir)
    probs = []
    for f in files:
        try:
            prob = parse_dat(os.path.join(args.nist_dir, f))
        except ParseError as e:
            sys.exit("error: %s" % e)
        for w in prob["warnings"]:
            print("warning: %s: %s" % (f, w), file=sys.stderr)
        if prob["name"] not in FORMULAS:
            sys.exit("error: no formula translation for %s" % prob["name"])
        probs.append(prob)
    missing = sorted(set(FORMULAS) - {p["name"] for p in probs})
    if missing:
        print("warning: no .dat file for %s" % missing, file=sys.stderr)

    if args.check:
        bad = check(probs)
        if bad:
            print("MISMATCH: %s" % " ".join(bad))
            return 1
        print("all %d problems match their certified RSS" % len(probs))
        return 0

    os.makedirs(args.out, exist_ok=True)

    def write(fname, text):
        with open(os.path.join(args.out, fname), "w", newline="\n") as fh:
            fh.write(text)

    cert = ["problem,param,value,stddev,rss"]
    for prob in probs:
        write(prob["name"] + ".csv", csv_text(prob))
        for s in (1, 2):
            write("%s.start%d.ini" % (prob["name"], s), ini_text(prob, s))
        cert += certified_rows(prob)
    write("certified.csv", "\n".join(cert) + "\n")
    print("wrote %d problems (%d ini, %d csv, certified.csv) to %s"
          % (len(probs), 2 * len(probs), len(probs), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
