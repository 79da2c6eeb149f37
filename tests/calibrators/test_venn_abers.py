"""Inductive Venn-Abers (Vovk & Petej 2014): known answers, brute force and the venn_abers package."""

import numpy as np
import pytest

from calbench.calibrators import get_calibrator
from calbench.calibrators import venn_abers as va
from calbench.calibrators.venn_abers import merge_interval, venn_abers_lookup, venn_abers_table
from calbench.functional import softmax


def _iso_value_at(x, y, s, label):
    """Brute force: isotonic regression (scikit-learn) of calibration + (s, label), value at s."""
    from sklearn.isotonic import IsotonicRegression

    ir = IsotonicRegression().fit(np.r_[x, s], np.r_[y, label])
    return ir.predict([s])[0]


def test_hand_computed_interval():
    # calibration scores 0.2 (y=0), 0.4 (y=1), 0.6 (y=0), 0.8 (y=1); test score 0.5.
    # with (0.5, 0): 0,1,0,0,1 -> PAV pools 1,0,0 to 1/3 -> p0 = 1/3
    # with (0.5, 1): 0,1,1,0,1 -> PAV pools 1,1,0 to 2/3 -> p1 = 2/3
    c, p0, p1 = venn_abers_table(np.array([0.2, 0.4, 0.6, 0.8]), np.array([0, 1, 0, 1]))
    lo, hi = venn_abers_lookup(c, p0, p1, np.array([0.5]))
    assert lo[0] == pytest.approx(1 / 3, abs=1e-15) and hi[0] == pytest.approx(2 / 3, abs=1e-15)
    assert merge_interval(lo, hi)[0] == pytest.approx((2 / 3) / (1 - 1 / 3 + 2 / 3), abs=1e-15)


@pytest.mark.parametrize("max_dense", [0, 10_000])  # PAV stacks, max-min table
def test_table_equals_brute_force_isotonic_fits(max_dense, monkeypatch):
    monkeypatch.setattr(va, "MAX_DENSE_POSITIVES", max_dense)
    rng = np.random.default_rng(0)
    x = np.round(rng.random(60), 1)  # many ties
    y = (rng.random(60) < x).astype(float)
    c, p0, p1 = venn_abers_table(x, y)
    for s in np.r_[c, -0.05, 1.05]:  # test scores tied with calibration scores, and outside
        lo, hi = venn_abers_lookup(c, p0, p1, np.array([s]))
        assert lo[0] == pytest.approx(_iso_value_at(x, y, s, 0.0), abs=1e-12)
        assert hi[0] == pytest.approx(_iso_value_at(x, y, s, 1.0), abs=1e-12)


@pytest.mark.parametrize(("k", "decimals"), [(2, None), (2, 1), (4, None), (5, 2)])
def test_equals_venn_abers_package(k, decimals, problem):
    va = pytest.importorskip("venn_abers")
    z, y = problem(400, k, seed=k)
    zt, _ = problem(300, k, seed=k + 10)
    if decimals:  # ties in the calibration scores and between test and calibration scores
        z, zt = np.round(z, decimals), np.round(zt, decimals)
    cal = get_calibrator("venn_abers").fit(z, y)
    ref, p0p1 = va.VennAbersCalibrator().predict_proba(
        p_cal=softmax(z), y_cal=y, p_test=softmax(zt), va_type="one_vs_rest", p0_p1_output=True
    )
    # same isotonic fits in float64: equal up to the rounding of the pooled means
    np.testing.assert_allclose(cal.predict_proba(zt), ref, rtol=0, atol=1e-12)
    lo, hi = cal.predict_interval(zt)
    if k == 2:
        ref_lo, ref_hi = p0p1[:, :1], p0p1[:, 1:]
    else:
        ref_lo = np.stack([q[:, 0] for q in p0p1], axis=1)
        ref_hi = np.stack([q[:, 1] for q in p0p1], axis=1)
    np.testing.assert_allclose(lo, ref_lo, rtol=0, atol=1e-12)
    np.testing.assert_allclose(hi, ref_hi, rtol=0, atol=1e-12)
    assert np.all(lo <= hi + 1e-12)


def _groups(x, y):
    order = np.argsort(x, kind="stable")
    _, start, counts = np.unique(x[order], return_index=True, return_counts=True)
    return counts.astype(float), np.add.reduceat(np.asarray(y, dtype=float)[order], start)


def test_maxmin_table_is_bitwise_the_pav_stacks():
    # integer counts make every pooled mean an exact ratio: both algorithms round the same one
    rng = np.random.default_rng(1)
    for trial in range(400):
        n = int(rng.integers(1, 80))
        x = np.round(rng.random(n), int(rng.integers(1, 4)))  # ties
        y = rng.random(n) < rng.random()  # from no positives to all positives
        w, t = _groups(x, y)
        dense, stacks = va._table_maxmin(w, t), va._table_stacks(w, t)
        np.testing.assert_array_equal(dense[0], stacks[0], err_msg=f"p0, trial {trial}")
        np.testing.assert_array_equal(dense[1], stacks[1], err_msg=f"p1, trial {trial}")


def test_table_path_by_targets_and_positives(monkeypatch):
    calls = []
    for name in ("_table_maxmin", "_table_stacks"):
        real = getattr(va, name)
        monkeypatch.setattr(va, name, lambda w, y, _r=real, _n=name: calls.append(_n) or _r(w, y))
    x = np.linspace(0.01, 0.99, 50)
    venn_abers_table(x, x > 0.5)  # binary, 24 positive groups
    venn_abers_table(x, np.where(x > 0.5, 0.7, 0.0))  # not 0/1: ratios are not exact
    monkeypatch.setattr(va, "MAX_DENSE_POSITIVES", 10)
    venn_abers_table(x, x > 0.5)  # more positives than the max-min table takes
    assert calls == ["_table_maxmin", "_table_stacks", "_table_stacks"]
