"""Tests of calbench.metrics.smooth: the smooth ECE of Blasiok & Nakkiran 2023 against
hand-computed and limiting cases, against a brute-force evaluation of its definition, and
against relplot.smECE (their reference implementation) on identical inputs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from calbench.metrics import METRICS
from calbench.metrics.smooth import (
    SIGMA_TOL,
    SmoothECE,
    smooth_ece,
    smooth_ece_1d,
    smooth_ece_binary,
    smooth_reliability,
)


def _kernel_mass(x, a, b, sigma, images=4):
    """int_a^b K_sigma(t, x) dt for the reflected Gaussian kernel, in closed form (Phi)."""
    total = 0.0
    for k in range(-images, images + 1):
        for centre in (x + 2 * k, -x + 2 * k):
            total += norm.cdf((b - centre) / sigma) - norm.cdf((a - centre) / sigma)
    return total


def _brute_force(f, y, sigma, m=20_001):
    """smECE_sigma = int_0^1 |(1/n) sum_i r_i K(t, f_i)| dt with the kernel evaluated at every
    sample (no grid for the samples) and a fine trapezoid rule in t."""
    t = np.linspace(0.0, 1.0, m)
    r = (y - f) / f.shape[0]
    s = np.empty(m)
    for lo in range(0, m, 4000):
        tt = t[lo : lo + 4000, None]
        kern = sum(
            norm.pdf((tt - f - 2 * k) / sigma) + norm.pdf((tt + f - 2 * k) / sigma)
            for k in range(-1, 2)  # sigma <= 0.2: further images weigh < exp(-100)
        )
        s[lo : lo + 4000] = kern @ r / sigma
    return np.trapezoid(np.abs(s), t)


def _simulated(n, seed, gamma, shape="confident"):
    """Top-label-like data: confidence f, correct with probability f ** gamma (gamma > 1:
    over-confident, gamma < 1: under-confident, 1: calibrated)."""
    rng = np.random.default_rng(seed)
    f = 0.5 + 0.5 * rng.beta(5, 1.5, n) if shape == "confident" else rng.beta(2, 2, n)
    y = (rng.random(n) < f**gamma).astype(np.float64)
    return f, y


# --------------------------------------------------------------------------------------------
# hand-computed and limiting cases
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("c,ybar", [(0.7, 0.5), (0.2, 0.25), (0.95, 0.6), (1.0, 0.9)])
def test_constant_prediction_gives_the_mean_gap(c, ybar):
    # f_i = c for all i: smECE_sigma = |mean(y) - c| int_0^1 K(t, c) dt = |mean(y) - c| for every
    # sigma (the reflected kernel integrates to 1), so the fixed point is that gap too.
    n = 200
    y = np.zeros(n)
    y[: int(round(ybar * n))] = 1.0
    out = smooth_ece_1d(np.full(n, c), y)
    assert out.value == pytest.approx(abs(ybar - c), abs=1e-12)
    assert abs(ybar - c) <= out.sigma < abs(ybar - c) + SIGMA_TOL  # upper end of the bracket
    for sigma in (0.01, 0.3, 1.0):
        assert smooth_ece_1d(np.full(n, c), y, sigma=sigma).value == pytest.approx(
            abs(ybar - c), abs=1e-12
        )


def test_two_points_at_fixed_sigma_hand_computed():
    # f = 0.3 (y = 1, r = +0.7) and f = 0.8 (y = 0, r = -0.8), n = 2. For sigma = 0.05 the
    # smoothed residual 0.35 K(t, 0.3) - 0.4 K(t, 0.8) changes sign once, at t* where
    # 0.35 K(t*, 0.3) = 0.4 K(t*, 0.8) (near 0.55), so
    # smECE = int_0^t* (...) dt - int_t*^1 (...) dt, each integral a difference of Phi's.
    sigma = 0.05
    # the crossing: equal weighted Gaussians -> t* = 0.55 + sigma^2 ln(0.35 / 0.4) / 0.5
    ts = 0.55 + sigma**2 * np.log(0.35 / 0.4) / 0.5
    left = 0.35 * _kernel_mass(0.3, 0, ts, sigma) - 0.4 * _kernel_mass(0.8, 0, ts, sigma)
    right = 0.4 * _kernel_mass(0.8, ts, 1, sigma) - 0.35 * _kernel_mass(0.3, ts, 1, sigma)
    expected = left + right
    got = smooth_ece_1d(np.array([0.3, 0.8]), np.array([1.0, 0.0]), sigma=sigma).value
    assert got == pytest.approx(expected, abs=1e-7)
    assert expected == pytest.approx(0.75, abs=1e-5)  # two well-separated bumps: (0.7 + 0.8) / 2


def test_perfect_calibration_tends_to_zero():
    # y ~ Bernoulli(f): the population smECE is 0; the estimate shrinks as n grows
    means = []
    for n in (500, 5_000, 50_000):
        vals = [smooth_ece_1d(*_simulated(n, seed, 1.0, "spread")).value for seed in range(4)]
        means.append(np.mean(vals))
    assert means[0] > means[1] > means[2]
    assert means[2] < 0.01
    # a miscalibrated model keeps a clear error at the same size
    assert smooth_ece_1d(*_simulated(50_000, 0, 2.0, "spread")).value > 0.1


@pytest.mark.parametrize("sigma", [0.2, 0.05, 0.01, 0.003])
def test_agrees_with_brute_force_definition(sigma):
    # masses on and next to the boundaries (confidence exactly 1 or within one grid cell of it)
    # are where discretisations differ: the brute force needs no grid for the samples
    f, y = _simulated(300, 7, 2.0)
    f[:20] = 1.0
    f[20:30] = 0.99995
    f[30:35] = 0.0
    got = smooth_ece_1d(f, y, sigma=sigma).value
    assert got == pytest.approx(_brute_force(f, y, sigma), abs=1e-5)


def test_fixed_point_property():
    # under-confident below 0.5 and over-confident above: residuals of both signs
    rng = np.random.default_rng(3)
    f = rng.beta(2, 2, 3000)
    y = (rng.random(3000) < 1 / (1 + ((1 - f) / f) ** 0.5)).astype(np.float64)
    out = smooth_ece_1d(f, y)
    assert isinstance(out, SmoothECE) and float(out) == out.value
    # sigma >= smECE_sigma, and one bisection step below it the inequality fails
    assert out.value <= out.sigma
    below = smooth_ece_1d(f, y, sigma=out.sigma - SIGMA_TOL).value
    assert below > out.sigma - SIGMA_TOL
    # smECE_sigma decreases in sigma (what makes the fixed point unique) where the residuals
    # change sign; with residuals of one sign it is the constant |mean(y - f)|
    values = [smooth_ece_1d(f, y, sigma=s).value for s in (0.01, 0.03, 0.1, 0.3, 1.0)]
    assert np.all(np.diff(values) < 0)
    f1, y1 = _simulated(3000, 3, 1.6)
    flat = [smooth_ece_1d(f1, y1, sigma=s).value for s in (0.01, 0.1, 1.0)]
    np.testing.assert_allclose(flat, np.mean(f1 - y1), rtol=1e-12)


# --------------------------------------------------------------------------------------------
# agreement with relplot
# --------------------------------------------------------------------------------------------
#: Tolerance against relplot.smECE. Both search the bandwidth on the same dyadic grid of (0, 1]
#: (10 halvings), so they may end one step (2**-10 ~ 0.001) apart when smECE_sigma lies within
#: relplot's discretisation error of sigma; smECE_sigma changes by less than that step across
#: it (|d smECE_sigma / d sigma| < 1). relplot evaluates on a coarse mesh (200 points, 1001 grid
#: nodes) and counts a sample in the last grid cell at 0 or 1 once where the reflected kernel
#: counts it twice; at the same bandwidth that moved the value by at most 6e-4 in these cases.
RELPLOT_TOL = 2e-3
RELPLOT_SAME_SIGMA_TOL = 1e-3


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n", [200, 2_000, 20_000])
@pytest.mark.parametrize("gamma", [0.5, 1.0, 2.0])
def test_agrees_with_relplot(seed, n, gamma):
    relplot = pytest.importorskip("relplot")
    shape = "spread" if seed == 1 else "confident"
    f, y = _simulated(n, seed, gamma, shape)
    ref, ref_sigma = relplot.smECE(f, y, return_width=True)
    out = smooth_ece_1d(f, y)
    assert out.value == pytest.approx(ref, abs=RELPLOT_TOL)
    assert abs(out.sigma - ref_sigma) <= SIGMA_TOL * 1.0001
    at_ref = smooth_ece_1d(f, y, sigma=ref_sigma).value
    assert at_ref == pytest.approx(ref, abs=RELPLOT_SAME_SIGMA_TOL)


def test_top_label_and_binary_against_relplot():
    relplot = pytest.importorskip("relplot")
    rng = np.random.default_rng(11)
    z = rng.normal(size=(4000, 5)) * 2.5
    probs = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    labels = np.array(
        [rng.choice(5, p=row) for row in np.exp(z / 1.5) / np.exp(z / 1.5).sum(1, keepdims=True)]
    )
    conf, correct = probs.max(1), (probs.argmax(1) == labels).astype(float)
    assert smooth_ece(probs, labels) == pytest.approx(relplot.smECE(conf, correct), abs=RELPLOT_TOL)
    assert METRICS["smece"](probs, labels) == smooth_ece(probs, labels)
    # binary: f = p(class 1), y = label
    p1 = rng.beta(2, 3, 3000)
    y = (rng.random(3000) < p1**1.3).astype(np.int64)
    p2 = np.column_stack([1 - p1, p1])
    assert smooth_ece_binary(p2, y) == smooth_ece_1d(p1, y.astype(float)).value
    assert smooth_ece_binary(p2, y) == pytest.approx(relplot.smECE(p1, y), abs=RELPLOT_TOL)
    # the binary error is not the top-label one (max(p, 1 - p) vs p)
    assert smooth_ece_binary(p2, y) != smooth_ece(p2, y)


# --------------------------------------------------------------------------------------------
# smoothed reliability curve
# --------------------------------------------------------------------------------------------
def test_smooth_reliability_two_clusters():
    # 300 samples at 0.3 with accuracy 0.6, 700 at 0.8 with accuracy 0.9, sigma = 0.03: far from
    # each other (17 bandwidths) the curve is the cluster's accuracy and the local count its size
    f = np.r_[np.full(300, 0.3), np.full(700, 0.8)]
    y = np.r_[np.ones(180), np.zeros(120), np.ones(630), np.zeros(70)]
    c = smooth_reliability(f, y, sigma=0.03, n_points=101, n_bootstrap=200, seed=1)
    i3, i8 = 30, 80
    assert c.t[i3] == pytest.approx(0.3) and c.t[i8] == pytest.approx(0.8)
    assert c.mean[i3] == pytest.approx(0.6, abs=1e-9)
    assert c.mean[i8] == pytest.approx(0.9, abs=1e-9)
    assert c.n_local[i3] == pytest.approx(300, rel=1e-6)
    assert c.n_local[i8] == pytest.approx(700, rel=1e-6)
    # the 90% bootstrap band of a cluster's accuracy: about +-1.645 sqrt(a (1 - a) / n_cluster)
    half = 1.645 * np.sqrt(0.6 * 0.4 / 300)
    assert c.lower[i3] < 0.6 < c.upper[i3]
    assert (c.upper[i3] - c.lower[i3]) / 2 == pytest.approx(half, rel=0.25)
    assert np.all(c.lower[[i3, i8]] <= c.upper[[i3, i8]])
    assert smooth_reliability(f, y, sigma=0.03, n_bootstrap=0).lower is None


def test_smooth_reliability_default_bandwidth_is_the_fixed_point():
    f, y = _simulated(2000, 4, 1.5)
    assert smooth_reliability(f, y, n_bootstrap=0).sigma == smooth_ece_1d(f, y).sigma


# --------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: smooth_ece_1d([0.2, 1.3], [0, 1]), "lie in"),
        (lambda: smooth_ece_1d([0.2, 0.3], [0, 2]), "0 or 1"),
        (lambda: smooth_ece_1d([0.2, 0.3], [0]), "one length"),
        (lambda: smooth_ece_1d([0.2], [1], sigma=0.0), "sigma"),
        (lambda: smooth_ece_1d([0.2], [1], sigma=True), "sigma"),
        (lambda: smooth_ece_binary(np.full((3, 3), 1 / 3), [0, 1, 2]), "two-class"),
        (lambda: smooth_ece(np.array([[2.0, -1.0]]), [0]), "logits"),
        (lambda: smooth_reliability([0.2], [1], n_points=1), "n_points"),
        (lambda: smooth_reliability([0.2], [1], level=95), "level"),
    ],
)
def test_bad_input_is_a_one_line_value_error(call, match):
    with pytest.raises(ValueError, match=match) as info:
        call()
    assert "\n" not in str(info.value)


def test_rounding_above_one_is_clipped():
    # float32 rows may hold an entry a few ulps above 1: clipped, not refused
    f = np.array([1.0 + 5e-7, 0.5, 0.7], dtype=np.float64)
    y = np.array([1.0, 0.0, 1.0])
    assert (
        smooth_ece_1d(f, y, sigma=0.1).value
        == smooth_ece_1d(np.minimum(f, 1.0), y, sigma=0.1).value
    )
