#!/usr/bin/env python3
"""Fits the polynomial coefficients of the CPU prelude's f32 exp/log/tanh/erf (ScalarPrelude.cpp).

Method: near-minimax fits of the *relative* error by Lawson's algorithm (iteratively reweighted
least squares on Chebyshev nodes of the interval), with the reference values from Python's
double-precision math module (exp, log1p, tanh, erf, erfc); then each coefficient is rounded to
float32 and the remaining ones are refitted (so the rounding of the leading coefficients is
compensated by the later ones). Prints the coefficients as C hex-float literals and the fitted
relative error (in double; the f32 evaluation adds its own rounding, measured exhaustively by
lib/Codegen/tools/ulp_check.cpp).

Usage: python3 lib/Codegen/tools/fit_transcendentals.py
"""
import math
import numpy as np


def lawson(design, target, weight, iters=60):
    """min_c max_i |weight_i * (design_i . c - target_i)| approximately (Lawson)."""
    n = len(target)
    lw = np.full(n, 1.0 / n)
    A = design * weight[:, None]
    b = target * weight
    best = None
    for _ in range(iters):
        sw = np.sqrt(lw)
        c, *_ = np.linalg.lstsq(A * sw[:, None], b * sw, rcond=None)
        err = np.abs(A @ c - b)
        m = err.max()
        if best is None or m < best[1]:
            best = (c, m)
        lw = lw * err
        lw /= lw.sum()
    return best[0]


def fit_rounded(x, basis, target, weight, fixed=()):
    """Fits coefficients of `basis` (list of arrays), rounding each to float32 in turn and
    refitting the rest. `fixed` is a list of already-rounded leading values."""
    coeffs = list(fixed)
    rest = target.copy()
    for i, c in enumerate(coeffs):
        rest = rest - c * basis[i]
    for i in range(len(coeffs), len(basis)):
        design = np.stack(basis[i:], axis=1)
        c = lawson(design, rest, weight)
        ci = float(np.float32(c[0]))
        coeffs.append(ci)
        rest = rest - ci * basis[i]
    return coeffs


def cheb(a, b, n=4000):
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (k + 0.5) / n)


def show(name, coeffs):
    print(name)
    for i, c in enumerate(coeffs):
        print(f"  c{i} = {float(np.float32(c)).hex()}f  // {np.float32(c)!r}")


# ---- exp: e^r = 1 + r + r^2 * P(r), |r| <= ln2/2 (after Cody-Waite reduction x = k ln2 + r) ----
r = cheb(-math.log(2) / 2 * 1.01, math.log(2) / 2 * 1.01)
r = r[np.abs(r) > 1e-6]
E = np.exp(r)
target = (E - 1 - r) / r**2
c = fit_rounded(r, [r**i for i in range(5)], target, r**2 / E)
show("exp: P(r) = c0 + c1 r + ... + c4 r^4", c)
P = sum(ci * r**i for i, ci in enumerate(c))
print("  max rel err of 1 + r + r^2 P:", np.max(np.abs((1 + r + r * r * P) / E - 1)))

# ---- log: log(1+f) = 2s + s R(z), s = f/(2+f), z = s^2, R(z) = z (c0 + c1 z + c2 z^2 + c3 z^3) ----
smax = (math.sqrt(2) - 1) / (math.sqrt(2) + 1) * 1.01
s = cheb(1e-4, smax)
z = s * s
L = np.array([math.log1p(2 * si / (1 - si)) for si in s])  # log(1+f), f = 2s/(1-s)
target = (L - 2 * s) / s  # = R(z)
c = fit_rounded(z, [z ** (i + 1) for i in range(4)], target, s / L)
show("log: R(z) = z (c0 + c1 z + c2 z^2 + c3 z^3)", c)
R = sum(ci * z ** (i + 1) for i, ci in enumerate(c))
print("  max rel err of 2s + s R:", np.max(np.abs((2 * s + s * R) / L - 1)))

# ---- tanh, |x| < 0.625: tanh(x) = x + x^3 P(x^2) ----
x = cheb(1e-3, 0.625)
w = x * x
T = np.tanh(x)
target = (T - x) / x**3
c = fit_rounded(w, [w**i for i in range(6)], target, x**3 / T)
show("tanh: P(w) = c0 + ... + c5 w^5", c)
P = sum(ci * w**i for i, ci in enumerate(c))
print("  max rel err:", np.max(np.abs((x + x**3 * P) / T - 1)))

# ---- erf, |x| < 0.921875: erf(x) = x + x P(x^2) ----
x = cheb(1e-3, 0.921875)
w = x * x
Ef = np.array([math.erf(v) for v in x])
target = Ef / x - 1
c = fit_rounded(w, [w**i for i in range(7)], target, x / Ef)
show("erf small: P(w) = c0 + ... + c6 w^6", c)
P = sum(ci * w**i for i, ci in enumerate(c))
print("  max rel err:", np.max(np.abs((x + x * P) / Ef - 1)))

# ---- erf, 0.921875 <= a <= 4: erf(a) = 1 - exp(-a^2) Q(t), t = 1/a - 0.6, Q = erfc(a) exp(a^2) ----
# (centred on 0.6 so that the float evaluation does not cancel large terms)
a = cheb(0.921875, 4.0)
t = 1 / a - 0.6
Q = np.array([math.erfc(v) * math.exp(v * v) for v in a])
c = fit_rounded(t, [t**i for i in range(10)], Q, 1 / Q)
show("erf large: Q(t) = c0 + ... + c9 t^9 (t = 1/a - 0.6)", c)
Qa = sum(ci * t**i for i, ci in enumerate(c))
print("  max rel err of Q:", np.max(np.abs(Qa / Q - 1)))

# ---- ln2 split for Cody-Waite (exp) and the log reconstruction: ln2_hi has 16 significant bits,
# so k * ln2_hi is exact for |k| < 2^8 ----
ln2 = math.log(2)
hi = round(ln2 * 2**16) / 2**16
lo = float(np.float32(ln2 - hi))
print(f"ln2_hi = {hi.hex()}f, ln2_lo = {lo.hex()}f")
