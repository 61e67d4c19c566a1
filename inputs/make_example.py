#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes inputs/decay.csv: 60 points of a two-component radioactive-decay-like curve
y = a exp(-k t) + c with Gaussian noise of known sigma, from fixed truth (a=12, k=0.35, c=1.5).
Deterministic (seeded); run once, the CSV is committed."""
import math
import random

rng = random.Random(20261121)
truth = dict(a=12.0, k=0.35, c=1.5)
with open("decay.csv", "w") as f:
    f.write("# synthetic decay curve, truth a=12 k=0.35 c=1.5, written by make_example.py\n")
    f.write("t,counts,sigma\n")
    for i in range(60):
        t = 0.25 * i
        mu = truth["a"] * math.exp(-truth["k"] * t) + truth["c"]
        sigma = 0.05 + 0.03 * mu
        f.write(f"{t:.2f},{mu + rng.gauss(0.0, sigma):.6f},{sigma:.6f}\n")
