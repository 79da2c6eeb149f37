"""Tests of calbench.metrics.caltests (and the verdicts of calbench.stats.multiplicity): hand-computed statistics, the null distributions against their
known moments and their second series, agreement with MAPIE's implementations on identical
inputs, the type-I error on perfectly calibrated data, and the Holm / BH verdicts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import ndtr

from calbench.functional import softmax
from calbench.metrics import caltests as C
from calbench.stats import multiplicity as V


def _calibrated(n, seed, gamma=1.0):
    """f ~ Beta(2, 2); y ~ Bernoulli(f ** gamma) (gamma = 1: perfectly calibrated)."""
    rng = np.random.default_rng(seed)
    f = rng.beta(2, 2, n)
    return f, (rng.random(n) < f**gamma).astype(np.float64)


# --------------------------------------------------------------------------------------------
# hand-computed statistics
# --------------------------------------------------------------------------------------------
def test_hand_example():
    # f = 0.2, 0.4, 0.7, 0.9 (already sorted), y = 0, 1, 1, 0
    # y - f = -0.2, 0.6, 0.3, -0.9 -> C = 0, -0.05, 0.1, 0.175, -0.05 (divided by n = 4)
    # sum f (1 - f) = 0.16 + 0.24 + 0.21 + 0.09 = 0.7 -> sigma = sqrt(0.7) / 4
    f = np.array([0.7, 0.2, 0.9, 0.4])
    y = np.array([1.0, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(
        C.cumulative_differences(f, y), [0, -0.05, 0.1, 0.175, -0.05], atol=1e-15
    )
    sigma = np.sqrt(0.7) / 4
    ks = C.ks_test_1d(f, y)
    assert ks.statistic == pytest.approx(0.175 / sigma, rel=1e-12)
    assert ks.p_value == pytest.approx(C.sup_abs_brownian_sf(0.175 / sigma), rel=1e-12)
    ku = C.kuiper_test_1d(f, y)
    assert ku.statistic == pytest.approx(0.225 / sigma, rel=1e-12)
    # Spiegelhalter: sum (y - f)(1 - 2f) = -0.2*0.6 + 0.6*0.2 + 0.3*(-0.4) + (-0.9)(-0.8) = 0.6
    # variance sum (1 - 2f)^2 f (1 - f) = 0.36*0.16 + 0.04*0.24 + 0.16*0.21 + 0.64*0.09 = 0.1584
    z = 0.6 / np.sqrt(0.1584)
    sp = C.spiegelhalter_test_1d(f, y)
    assert sp.statistic == pytest.approx(z, rel=1e-12)
    assert sp.p_value == pytest.approx(2 * ndtr(-z), rel=1e-12)
    assert C.spiegelhalter_test_1d(f, y, alternative="greater").p_value == pytest.approx(ndtr(-z))
    assert C.spiegelhalter_test_1d(f, y, alternative="less").p_value == pytest.approx(ndtr(z))


def test_ties_are_read_at_the_end_of_each_run():
    # three samples at 0.5 (y = 1, 0, 1 in some order) and one at 0.8: C only after the run
    f = np.array([0.5, 0.5, 0.8, 0.5])
    for y in ([1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]):
        np.testing.assert_allclose(
            C.cumulative_differences(f, np.array(y)), [0, 0.5 / 4, -0.3 / 4], atol=1e-15
        )


def test_kuiper_range_starts_at_zero():
    # every sample over-confident: C decreases from C_0 = 0, so the range is |C_n|, the same
    # as max |C| (a path that never goes above its start)
    f = np.array([0.6, 0.7, 0.8, 0.9])
    y = np.zeros(4)
    ks, ku = C.ks_test_1d(f, y), C.kuiper_test_1d(f, y)
    assert ku.statistic == pytest.approx(ks.statistic)
    assert ku.statistic == pytest.approx(3.0 / 4 / (np.sqrt(0.24 + 0.21 + 0.16 + 0.09) / 4))


# --------------------------------------------------------------------------------------------
# the null distributions
# --------------------------------------------------------------------------------------------
def test_null_distribution_moments():
    # E sup|B| = sqrt(pi / 2); the range R of B on [0, 1]: E R = 2 sqrt(2 / pi),
    # E R^2 = 4 ln 2 (Feller 1951)
    assert quad(C.sup_abs_brownian_sf, 0, 20, limit=200)[0] == pytest.approx(
        np.sqrt(np.pi / 2), rel=1e-9
    )
    assert quad(C.brownian_range_sf, 0, 20, limit=200)[0] == pytest.approx(
        2 * np.sqrt(2 / np.pi), rel=1e-9
    )
    second = quad(lambda x: 2 * x * C.brownian_range_sf(x), 0, 20, limit=200)[0]
    assert second == pytest.approx(4 * np.log(2), rel=1e-9)


@pytest.mark.parametrize("x", [0.3, 0.7, 1.0, 1.5, 2.0, 2.5, 4.0, 7.0])
def test_null_series_agree_on_both_sides_of_the_switch(x):
    # the other series of each survival function, summed far
    k = np.arange(1, 400)
    ks = 4 * np.sum((-1.0) ** (k - 1) * ndtr(-(2 * k - 1) * x))
    h = np.arange(0, 40) + 0.5
    rng_theta = 1 - np.sum((8 / x**2 + 2 / (h**2 * np.pi**2)) * np.exp(-2 * h**2 * np.pi**2 / x**2))
    rng_refl = 8 * np.sum((-1.0) ** (k - 1) * k * ndtr(-k * x))
    assert C.sup_abs_brownian_sf(x) == pytest.approx(ks, rel=1e-9, abs=1e-15)
    want = rng_refl if x >= 2 else rng_theta  # the accurate one on that side
    assert C.brownian_range_sf(x) == pytest.approx(want, rel=1e-9, abs=1e-15)
    if 1.0 <= x <= 3.0:
        assert rng_theta == pytest.approx(rng_refl, rel=1e-9)


def test_tail_p_values_keep_their_resolution():
    # 1 - cdf would round to 0 here; the survival series give 4 Phi(-x)-sized values
    assert C.sup_abs_brownian_sf(10.0) == pytest.approx(4 * ndtr(-10.0), rel=1e-6)
    assert 0 < C.brownian_range_sf(12.0) < 1e-30


# --------------------------------------------------------------------------------------------
# agreement with MAPIE
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n,gamma", [(60, 1.0), (500, 1.3), (2000, 1.0), (2000, 0.8)])
def test_agrees_with_mapie(seed, n, gamma):
    cal = pytest.importorskip("mapie.metrics.calibration")
    f, y = _calibrated(n, seed, gamma)
    ks, ku = C.ks_test_1d(f, y), C.kuiper_test_1d(f, y)
    sp = C.spiegelhalter_test_1d(f, y, alternative="greater")

    # MAPIE breaks ties with a relative jitter of 1e-8; these predictions have no ties.
    # Its p-values are 1 - cdf from series of O(1) alternating terms: an absolute rounding error
    # of 1e-12 to 1e-11 (seen: 1.2e-11 where the tail is 9e-15), so p-values are compared where
    # that error is negligible, and both must be tiny elsewhere (ours sum the tail itself).
    def same_p(ours, theirs):
        if theirs > 1e-4:
            assert ours == pytest.approx(theirs, rel=1e-6)
        else:
            assert ours < 1e-4 and abs(ours - theirs) < 1e-10

    assert ks.statistic == pytest.approx(cal.kolmogorov_smirnov_statistic(y, f), rel=1e-6)
    same_p(ks.p_value, cal.kolmogorov_smirnov_p_value(y, f))
    c = C.cumulative_differences(f, y)[1:]
    if c.min() < 0 < c.max():  # MAPIE's range leaves out C_0 = 0: equal when the path crosses it
        assert ku.statistic == pytest.approx(cal.kuiper_statistic(y, f), rel=1e-6)
        same_p(ku.p_value, cal.kuiper_p_value(y, f))
    assert sp.statistic == pytest.approx(cal.spiegelhalter_statistic(y, f), rel=1e-10)
    assert sp.p_value == pytest.approx(cal.spiegelhalter_p_value(y, f), rel=1e-9, abs=1e-15)


def test_null_cdfs_agree_with_mapie():
    cal = pytest.importorskip("mapie.metrics.calibration")
    for x in np.linspace(0.2, 5.0, 49):
        assert 1 - C.sup_abs_brownian_sf(x) == pytest.approx(
            cal.kolmogorov_smirnov_cdf(x), abs=1e-11
        )
        assert 1 - C.brownian_range_sf(x) == pytest.approx(cal.kuiper_cdf(x), abs=1e-11)


def test_top_label_pairs_and_binary_target():
    cal = pytest.importorskip("mapie.metrics.calibration")
    rng = np.random.default_rng(5)
    probs = softmax(rng.normal(size=(800, 4)) * 2)
    labels = np.array([rng.choice(4, p=row) for row in probs])
    f, y = probs.max(1), (probs.argmax(1) == labels).astype(float)
    out = C.calibration_tests(probs, labels)
    assert out["ks"].statistic == pytest.approx(cal.kolmogorov_smirnov_statistic(y, f), rel=1e-6)
    assert out["spiegelhalter"] == C.spiegelhalter_test_1d(f, y)
    assert C.kuiper_calibration_test(probs, labels) == C.kuiper_test_1d(f, y)
    p2 = np.column_stack([1 - probs[:, 0], probs[:, 0]])
    y2 = (labels == 0).astype(np.int64)
    assert C.ks_calibration_test(p2, y2, target="binary") == C.ks_test_1d(p2[:, 1], y2)
    with pytest.raises(ValueError, match="two-class"):
        C.spiegelhalter_test(probs, labels, target="binary")


# --------------------------------------------------------------------------------------------
# type-I error and power
# --------------------------------------------------------------------------------------------
def test_type_one_error_near_alpha_on_calibrated_data():
    # 400 seeded replicates of n = 1000 calibrated pairs: the rejection rate at 5% must lie
    # within 3 binomial standard errors (0.033) of 0.05 for every test
    rejections = {"spiegelhalter": 0, "ks": 0, "kuiper": 0}
    reps = 400
    for seed in range(reps):
        f, y = _calibrated(1000, seed)
        for t in (C.spiegelhalter_test_1d(f, y), C.ks_test_1d(f, y), C.kuiper_test_1d(f, y)):
            rejections[t.name] += t.p_value < 0.05
    se = np.sqrt(0.05 * 0.95 / reps)
    for name, r in rejections.items():
        assert abs(r / reps - 0.05) < 3 * se, (name, r / reps)


def test_miscalibration_is_detected():
    # over-confident top-label-like predictions (f >= 0.5, where Spiegelhalter's weight 1 - 2f
    # keeps one sign; across 0.5 its terms cancel and it has little power against f ** gamma)
    rng = np.random.default_rng(0)
    f = 0.5 + 0.5 * rng.beta(5, 1.5, 3000)
    y = (rng.random(3000) < f**1.5).astype(np.float64)
    for t in (C.spiegelhalter_test_1d(f, y), C.ks_test_1d(f, y), C.kuiper_test_1d(f, y)):
        assert t.p_value < 1e-6, t


# --------------------------------------------------------------------------------------------
# verdicts
# --------------------------------------------------------------------------------------------
def test_verdicts_holm_hand_example():
    # m = 4 sorted p-values 0.001, 0.013, 0.02, 0.5 -> Holm: 0.004, 0.039, 0.04, 0.5
    p = {("a", "ts"): 0.02, ("a", "iso"): 0.5, ("b", "ts"): 0.001, ("b", "iso"): 0.013}
    v = V.calibration_verdicts(p)
    assert [round(v[k].adjusted, 12) for k in p] == [0.04, 0.5, 0.004, 0.039]
    assert [v[k].calibrated for k in p] == [False, True, False, False]
    assert v[("a", "ts")].p_value == 0.02
    # BH: 0.004, 0.026, 0.02667, 0.5 -> the same decisions at 5%, a different adjustment
    bh = V.calibration_verdicts(p, method="bh")
    np.testing.assert_allclose(
        [bh[k].adjusted for k in p], [0.08 / 3, 0.5, 0.004, 0.026], rtol=1e-12
    )
    # at alpha = 0.03 Holm keeps 0.013 (adjusted 0.039) calibrated, BH rejects it (0.026)
    assert V.calibration_verdicts(p, alpha=0.03)[("b", "iso")].calibrated
    assert not V.calibration_verdicts(p, alpha=0.03, method="bh")[("b", "iso")].calibrated


def test_verdicts_agree_with_statsmodels_style_reference():
    # Holm equals calbench.stats.holm; BH is monotone in the raw p-values and never below them
    from calbench.stats import holm

    rng = np.random.default_rng(0)
    p = rng.random(30) ** 3
    v = V.calibration_verdicts({i: float(x) for i, x in enumerate(p)})
    np.testing.assert_allclose([v[i].adjusted for i in range(30)], holm(p))
    bh = V.benjamini_hochberg(p)
    order = np.argsort(p)
    assert np.all(np.diff(bh[order]) >= 0) and np.all(bh >= p)
    # BH by its definition: the largest i with p_(i) <= i alpha / m is rejected with all below
    m, alpha = 30, 0.05
    ranked = p[order]
    passing = np.flatnonzero(ranked <= np.arange(1, m + 1) * alpha / m)
    n_rejected = passing.max() + 1 if passing.size else 0
    assert np.sum(bh <= alpha) == n_rejected


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: V.calibration_verdicts({}), "non-empty"),
        (lambda: V.calibration_verdicts({"a": 1.5}), r"\[0, 1\]"),
        (lambda: V.calibration_verdicts({"a": 0.5}, alpha=5), "alpha"),
        (lambda: V.calibration_verdicts({"a": 0.5}, method="bonf"), "method"),
        (lambda: C.ks_test_1d([0.0, 1.0], [0, 1]), "null variance"),
        (lambda: C.spiegelhalter_test_1d([0.5, 0.5], [0, 1]), "null variance"),
        (lambda: C.kuiper_test_1d([0.2, 0.3], [0, 2]), "0 or 1"),
        (lambda: C.ks_calibration_test(np.array([[3.0, -2.0]]), [0]), "logits"),
        (lambda: C.spiegelhalter_test_1d([0.2], [1], alternative="up"), "alternative"),
    ],
)
def test_bad_input_is_a_one_line_value_error(call, match):
    with pytest.raises(ValueError, match=match) as info:
        call()
    assert "\n" not in str(info.value)


def test_rounding_above_one_is_clipped():
    f = np.array([1.0 + 5e-7, 0.5, 0.7, 0.2])
    y = np.array([1.0, 0.0, 1.0, 0.0])
    assert C.ks_test_1d(f, y) == C.ks_test_1d(np.minimum(f, 1.0), y)
    with pytest.raises(ValueError, match="lie in"):
        C.ks_test_1d(f + 1e-3, y)
