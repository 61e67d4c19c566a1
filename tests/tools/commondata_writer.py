#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes small NNPDF "new commondata"-like sets (YAML, by hand: an independent writer, not
ensemblefit's reader's library) for tests/mpi/commondata.sh, good and malformed:

    commondata_writer.py OUTDIR

OUTDIR/sets/<SET>/ holds metadata.yaml, data_F2.yaml, kinematics_F2.yaml, uncertainties_F2.yaml.
Good sets: TOY_P (proton) and TOY_D (deuteron), with every treatment: UNCORR ADD (stat, sys),
CORR MULT and CORR ADD, and a type TOYNORM (MULT) shared by both sets.
OUTDIR/toy.csv is the same data laid out for the generic correlated path ([data] file,
systematics, dataset), computed here from the definitions: sigma = the UNCORR sources in
quadrature, MULT columns relative to the central value, each CORR source its own column and
TOYNORM one column. OUTDIR/cuts.txt: the rows kept by the cuts of the test (Q2 > 2, W2 > 5).
OUTDIR/cases.txt: one malformed set per line, "SET|EXIT|PATTERN" (PATTERN a grep -E regex of
the one error line: the file and line the writer knows it broke, and the key).
"""
import math
import os
import sys

OUT = sys.argv[1]
SETS = os.path.join(OUT, "sets")


def kin_bins(points):
    lines = ["bins:"]
    for x, q2 in points:
        lines += ["- x:", "    min: null", f"    mid: {x!r}", "    max: null",
                  "  Q2:", "    min: null", f"    mid: {q2!r}", "    max: null"]
    return lines


def write_set(name, points, central, defs, values, ndata=None, operation="'NULL'", edit=None):
    """defs: [(source, treatment, type)]; values: per point, one value per source.
    edit(file, lines) may break a file; it returns the 1-based line it broke (or None)."""
    d = os.path.join(SETS, name)
    os.makedirs(d, exist_ok=True)
    files = {
        "metadata.yaml": [
            f"setname: {name}",
            "implemented_observables:",
            "- observable_name: EM-SIGMARED",   # listed, but its files are absent: ignored
            "  ndata: 3",
            "  kinematics:",
            "    file: kinematics_SIGMARED.yaml",
            "  data_uncertainties: []",
            "  data_central: data_SIGMARED.yaml",
            "- observable_name: EM-F2",
            f"  ndata: {len(points) if ndata is None else ndata}",
            "  kinematics:",
            "    file: kinematics_F2.yaml",
            "  theory:",
            f"    operation: {operation}",
            "  data_uncertainties: []",
            "  variants:",
            "    legacy:",
            "      data_uncertainties:",
            "      - uncertainties_F2.yaml",
            "    other:",
            "      data_uncertainties:",
            "      - uncertainties_other.yaml",
            "  data_central: data_F2.yaml",
        ],
        "data_F2.yaml": ["data_central:"] + [f"- {c!r}" for c in central],
        "kinematics_F2.yaml": kin_bins(points),
        "uncertainties_F2.yaml": ["definitions:"],
    }
    u = files["uncertainties_F2.yaml"]
    for src, treat, typ in defs:
        u += [f"  {src}:", f"    description: {src} of {name}", f"    treatment: {treat}", f"    type: {typ}"]
    u.append("bins:")
    for row in values:
        for j, (src, _, _) in enumerate(defs):
            u.append(("- " if j == 0 else "  ") + f"{src}: {row[j]!r}")
    broken = None
    if edit:
        for fname, lines in files.items():
            r = edit(fname, lines)
            if r is not None:
                broken = (fname, r)
    for fname, lines in files.items():
        with open(os.path.join(d, fname), "w") as f:
            f.write("\n".join(lines) + "\n")
    return broken


# The good sets: F2-like values on a small (x, Q2) grid.
P_PTS = [(0.1, 1.5), (0.1, 10.0), (0.2, 5.0), (0.2, 20.0), (0.35, 8.0), (0.5, 12.0), (0.5, 40.0), (0.7, 30.0)]
D_PTS = [(0.15, 4.0), (0.25, 9.0), (0.4, 15.0), (0.6, 25.0), (0.6, 3.0), (0.05, 2.5)]


def f2(x, q2, t):
    return (0.9 if t == 1 else 0.8) * x ** 0.3 * (1 - x) ** 3 * (1 + 0.05 * math.log(q2)) + 0.01 * math.sin(40 * x * q2)


P_DEF = [("stat", "ADD", "UNCORR"), ("sys", "ADD", "UNCORR"), ("c1", "MULT", "CORR"), ("norm", "MULT", "TOYNORM"),
         ("c2", "ADD", "CORR")]
D_DEF = [("stat", "ADD", "UNCORR"), ("norm", "MULT", "TOYNORM"), ("c1", "ADD", "CORR")]


def p_values(i, c):
    return [0.004 + 0.001 * (i % 3), 0.002, 0.01 * c * (1 if i % 2 else -1), 0.03 * c, 0.003 * (i - 3)]


def d_values(i, c):
    return [0.005 + 0.0005 * i, 0.02 * c, -0.002 * (i + 1)]


P_F2 = [round(f2(x, q, 1), 6) for x, q in P_PTS]
D_F2 = [round(f2(x, q, 3), 6) for x, q in D_PTS]
P_VAL = [p_values(i, c) for i, c in enumerate(P_F2)]
D_VAL = [d_values(i, c) for i, c in enumerate(D_F2)]
write_set("TOY_P", P_PTS, P_F2, P_DEF, P_VAL)
write_set("TOY_D", D_PTS, D_F2, D_DEF, D_VAL)

# The same data for the generic path, after the cuts Q2 > 2 and W2 = Q2 (1-x)/x > 5.
cols = ["TOY_P:c1", "TOYNORM", "TOY_P:c2", "TOY_D:c1"]
mult = {"TOY_P:c1": True, "TOYNORM": True, "TOY_P:c2": False, "TOY_D:c1": False}
rows, kept = [], []
for d, (name, pts, cen, defs, vals, target) in enumerate(
        [("TOY_P", P_PTS, P_F2, P_DEF, P_VAL, 1), ("TOY_D", D_PTS, D_F2, D_DEF, D_VAL, 3)]):
    for i, ((x, q2), c, v) in enumerate(zip(pts, cen, vals)):
        if not (q2 > 2 and q2 * (1 - x) / x > 5):
            continue
        kept.append(f"{name} {i + 1}")
        var = 0.0
        sys_cols = {k: 0.0 for k in cols}
        for (src, treat, typ), val in zip(defs, v):
            if typ == "UNCORR":
                var += val * val
                continue
            col = f"{name}:{src}" if typ == "CORR" else typ
            sys_cols[col] = val / c if treat == "MULT" else val
        rows.append([x, q2, target, c, math.sqrt(var)] + [sys_cols[k] for k in cols] + [d])
with open(os.path.join(OUT, "toy.csv"), "w") as f:
    f.write("x,Q2,target,F2,sigma," + ",".join(k.replace(":", "_") for k in cols) + ",dataset\n")
    for r in rows:
        f.write(",".join(repr(float(v)) for v in r) + "\n")
with open(os.path.join(OUT, "toy_systematics.txt"), "w") as f:
    f.write(", ".join(k.replace(":", "_") + (":mult" if mult[k] else "") for k in cols) + "\n")
with open(os.path.join(OUT, "cuts.txt"), "w") as f:
    f.write("\n".join(kept) + "\n")

# Malformed sets, one fault each.
cases = []


def case(name, code, pattern_of, **kw):
    broken = write_set(name, P_PTS, P_F2, P_DEF, P_VAL, **kw)
    cases.append(f"{name}|{code}|{pattern_of(broken)}")


def drop_q2(fname, lines):  # bin 3 of the kinematics without its Q2
    if fname != "kinematics_F2.yaml":
        return None
    start = 1 + 2 * 8 + 4  # "bins:" + two bins + bin 3's x block: its "  Q2:" line (0-based)
    del lines[start:start + 4]
    return start  # the 1-based line of bin 3's "- x:" entry, which now lacks Q2


case("MISSING_Q2_P", 3, lambda b: f"{b[0]}:{b[1] - 3}: bin 3: missing key 'Q2'", edit=drop_q2)


def short_list(fname, lines):  # the last bin of the uncertainties dropped: 7 bins for ndata 8
    if fname != "uncertainties_F2.yaml":
        return None
    del lines[-len(P_DEF):]
    return lines.index("bins:") + 1


case("SHORT_UNC_P", 3, lambda b: f"{b[0]}:{b[1] + 1}: bins: 7 entries, but .*metadata.yaml says ndata = 8",
     edit=short_list)


def negative(fname, lines):  # bin 2's stat negative
    if fname != "uncertainties_F2.yaml":
        return None
    i = lines.index("bins:") + 1 + len(P_DEF)  # bin 2's first line: "- stat: ..."
    lines[i] = "- stat: -0.004"
    return i + 1


case("NEG_UNC_P", 3, lambda b: f"{b[0]}:{b[1]}: bin 2: stat: negative uncertainty", edit=negative)


def bad_treatment(fname, lines):
    if fname != "uncertainties_F2.yaml":
        return None
    i = lines.index("    treatment: MULT")
    lines[i] = "    treatment: MULTIPLICATIVE"
    return i + 1


case("BAD_TREAT_P", 3, lambda b: f"{b[0]}:{b[1]}: definitions.c1.treatment: unknown treatment 'MULTIPLICATIVE'",
     edit=bad_treatment)


def short_row(fname, lines):  # bin 4 lacks its c2 value: a list of the wrong length
    if fname != "uncertainties_F2.yaml":
        return None
    i = lines.index("bins:") + 1 + 3 * len(P_DEF)
    del lines[i + len(P_DEF) - 1]
    return i + 1


case("SHORT_ROW_P", 3, lambda b: f"{b[0]}:{b[1]}: bin 4: 4 sources, but definitions has 5", edit=short_row)
case("NDATA_P", 3, lambda b: "data_F2.yaml:2: data_central: 8 entries, but .*metadata.yaml says ndata = 9", ndata=9)
case("RATIO_P", 2, lambda b: "metadata.yaml:14: observable EM-F2 has theory operation RATIO", operation="RATIO")


def not_number(fname, lines):
    if fname != "data_F2.yaml":
        return None
    lines[5] = "- 0.3x"
    return 6


case("NOT_NUMBER_P", 3, lambda b: f"{b[0]}:{b[1]}: data_central entry 5: expected a finite number, got '0.3x'",
     edit=not_number)


def syntax(fname, lines):
    if fname != "kinematics_F2.yaml":
        return None
    lines[6] = "    mid: [0.1"
    return 7


case("SYNTAX_P", 3, lambda b: f"{b[0]}:[0-9]+: YAML syntax error", edit=syntax)
# TOYNORM as ADD here and MULT in TOY_P: one shared type needs one treatment (read with TOY_P).
write_set("MIXED_D", D_PTS, D_F2, [("stat", "ADD", "UNCORR"), ("norm", "ADD", "TOYNORM"), ("c1", "ADD", "CORR")], D_VAL)
cases.append("MIXED_D|3|MIXED_D/: source norm of type TOYNORM is ADD, but TOY_P norm of the same type is MULT")
write_set("NOTARGET", P_PTS, P_F2, P_DEF, P_VAL)
cases.append("NOTARGET|2|NOTARGET/: cannot tell the target")
with open(os.path.join(OUT, "cases.txt"), "w") as f:
    f.write("\n".join(cases) + "\n")
