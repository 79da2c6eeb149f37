"""Unbiased squared calibration errors (calbench.metrics.unbiased): exact expectations by
enumeration, leave-one-out values against brute force, bootstrap forms, variance parts."""

import itertools
import math

import numpy as np
import pytest

from calbench import stats as S
from calbench.metrics import METRICS
from calbench.metrics import unbiased as U
from calbench.metrics.binning import top_label, width_bin_ids
from calbench.metrics.ece import debiased_from_values


def softmax_rows(n, k, seed, scale=2.0):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, k)) * scale
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True), rng


def brute_t_top(x, t, ids):
    """T by its definition: pairs of distinct samples in one bin."""
    n = x.shape[0]
    total = 0.0
    for b in np.unique(ids):
        m = np.flatnonzero(ids == b)
        if m.size < 2:
            continue
        d = t[m] - x[m]
        pairs = sum(d[i] * d[j] for i in range(m.size) for j in range(m.size) if i != j)
        total += pairs / (m.size - 1)
    return total / n


def brute_t_classwise(p, y, n_bins):
    n, k = p.shape
    return np.mean(
        [
            brute_t_top(p[:, j], (y == j).astype(float), width_bin_ids(p[:, j], n_bins)) * 1.0
            for j in range(k)
        ]
    )


def test_top_label_matches_its_definition():
    p, rng = softmax_rows(40, 4, 0)
    y = rng.integers(0, 4, 40)
    x, t = top_label(p, y)
    want = brute_t_top(x, t, width_bin_ids(x, 15))
    assert U.ub_sq_from_values(x, t, 15, "width") == pytest.approx(want, abs=1e-15)
    assert METRICS["ece_ub"](p, y) == pytest.approx(math.sqrt(max(want, 0.0)), abs=1e-12)


def test_classwise_matches_its_definition_and_bins():
    p, rng = softmax_rows(60, 5, 1)
    y = rng.integers(0, 5, 60)
    for b in (1, 4, 15):
        assert U.cw_ub_sq(p, y, b) == pytest.approx(brute_t_classwise(p, y, b), abs=1e-15)
    # N / (2 K) = 6 bins per class for 60 samples of 5 classes
    assert U.classwise_bins(60, 5) == 6 and U.classwise_bins(500, 100) == 2
    assert U.classwise_bins(3000, 100) == 15 and U.classwise_bins(10, 100) == 1
    want = math.sqrt(max(U.cw_ub_sq(p, y, 6), 0.0))
    assert METRICS["cwece_ub"](p, y) == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("kind", ["top", "classwise"])
def test_exactly_unbiased_by_enumerating_every_label_outcome(kind):
    """Fixed predictions, each sample's label drawn from its own distribution pi_i: the mean of
    T over all K^N label outcomes equals (1/(N G)) sum_b sum_{i != j in b} e_i e_j / (n_b - 1)
    with e_i = E[target_i] - value_i, and, when e is constant in every bin, the population
    squared binned error sum_b (n_b / N) mu_b^2. The plug-in squared error is biased."""
    n, k, n_bins = 6, 3, 3
    p, rng = softmax_rows(n, k, 2, scale=1.5)
    pi, _ = softmax_rows(n, k, 3, scale=1.0)
    mean_t = mean_plugin = 0.0
    for labels in itertools.product(range(k), repeat=n):
        y = np.array(labels)
        prob = float(np.prod(pi[np.arange(n), y]))
        if kind == "top":
            x, t = top_label(p, y)
            mean_t += prob * U.ub_sq_from_values(x, t, n_bins, "width")
            ids = width_bin_ids(x, n_bins)
            count = np.bincount(ids, minlength=n_bins)
            gap = np.bincount(ids, weights=t - x, minlength=n_bins)
            mean_plugin += prob * np.sum(gap[count > 0] ** 2 / count[count > 0]) / n
        else:
            mean_t += prob * U.cw_ub_sq(p, y, n_bins)
    if kind == "top":
        x = p.max(axis=1)
        e = pi[np.arange(n), p.argmax(axis=1)] - x
        want = brute_t_top(x, e + x, width_bin_ids(x, n_bins))
        assert mean_plugin > want + 1e-3  # the plug-in's upward bias
    else:
        want = np.mean(
            [brute_t_top(p[:, j], pi[:, j], width_bin_ids(p[:, j], n_bins)) for j in range(k)]
        )
    assert mean_t == pytest.approx(want, abs=1e-13)


def test_unbiased_for_the_population_value_when_bins_share_one_gap():
    # two bins of three samples, each bin's e constant: E[T] = sum_b (n_b/N) mu_b^2 exactly
    x = np.array([0.7, 0.7, 0.7, 0.95, 0.95, 0.95])
    acc = np.array([0.5, 0.5, 0.5, 0.95, 0.95, 0.95])  # P(correct): gaps -0.2 and 0
    ids = width_bin_ids(x, 15)
    mean_t = 0.0
    for outcome in itertools.product((0.0, 1.0), repeat=6):
        t = np.array(outcome)
        prob = float(np.prod(np.where(t == 1.0, acc, 1.0 - acc)))
        mean_t += prob * U.ub_sq_from_values(x, t, 15, "width")
    assert mean_t == pytest.approx(0.5 * 0.2**2, abs=1e-14)
    assert len(set(ids.tolist())) == 2


def test_equals_kumar_debiased_error_when_values_are_constant_in_bins():
    rng = np.random.default_rng(4)
    levels = np.array([0.55, 0.72, 0.91])  # one value per equal-width bin
    x = levels[rng.integers(0, 3, 300)]
    t = (rng.random(300) < x - 0.05).astype(float)
    assert U.ub_from_values(x, t, 15, "width") == pytest.approx(
        debiased_from_values(x, t, 15, "width"), abs=1e-12
    )
    # with spread values inside the bins they differ
    x2 = np.clip(x + rng.uniform(-0.03, 0.03, 300), 0, 1)
    assert U.ub_from_values(x2, t, 15, "width") != pytest.approx(
        debiased_from_values(x2, t, 15, "width"), abs=1e-6
    )


@pytest.mark.parametrize("binning", ["width", "mass"])
def test_top_label_leave_one_out_against_a_loop(binning):
    p, rng = softmax_rows(80, 4, 5)
    y = rng.integers(0, 4, 80)
    x, t = top_label(p, y)
    u = U.ub_top_jackknife(x, t, 15, binning)
    ids = U.top_sums(x, t, 15, binning)[0]  # the full sample's bins, held fixed
    loop = [brute_t_top(np.delete(x, i), np.delete(t, i), np.delete(ids, i)) for i in range(80)]
    assert u.t == pytest.approx(brute_t_top(x, t, ids), abs=1e-15)
    np.testing.assert_allclose(u.loo, loop, atol=1e-15)


def test_classwise_leave_one_out_against_a_loop():
    p, rng = softmax_rows(50, 6, 6)
    y = rng.integers(0, 6, 50)
    u = U.cw_ub_jackknife(p, y, 4)
    loop = [U.cw_ub_sq(np.delete(p, i, 0), np.delete(y, i), 4) for i in range(50)]
    np.testing.assert_allclose(u.loo, loop, atol=1e-15)
    assert u.t == pytest.approx(U.cw_ub_sq(p, y, 4), abs=1e-15)


def test_jackknife_se_formula():
    loo = np.array([1.0, 2.0, 4.0, 7.0])
    mean = loo.mean()
    assert U.jackknife_se(loo) == pytest.approx(math.sqrt(3 / 4 * np.sum((loo - mean) ** 2)))


def test_bootstrap_forms_equal_the_metric_on_repeated_samples():
    p, rng = softmax_rows(120, 5, 7)
    y = rng.integers(0, 5, 120)
    w = rng.integers(0, 3, size=(3, 120)).astype(float)
    x, t = top_label(p, y)
    g_top, g_cw = U.ub_top_weighted(x, t, 15), U.cw_ub_weighted(p, y, 4)
    assert g_top(None) == pytest.approx(U.ub_sq_from_values(x, t), abs=1e-15)
    assert g_cw(None) == pytest.approx(U.cw_ub_sq(p, y, 4), abs=1e-15)
    for row, got_top, got_cw in zip(w, g_top(w), g_cw(w), strict=True):
        idx = np.repeat(np.arange(120), row.astype(int))
        assert got_top == pytest.approx(U.ub_sq_from_values(x[idx], t[idx]), abs=1e-14)
        assert got_cw == pytest.approx(U.cw_ub_sq(p[idx], y[idx], 4), abs=1e-14)


def brute_paired_excess(xa, xb, t, ids_a, ids_b):
    """D_a + D_b - 2 C of unbiased.paired_excess by explicit pair loops (top-label)."""
    n = xa.shape[0]
    va, vb = xa * (1 - xa), xb * (1 - xb)
    ca, cb = np.bincount(ids_a), np.bincount(ids_b)
    da = db = cov = 0.0
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            if ids_a[i] == ids_a[j]:
                da += 2 * va[i] * va[j] / (ca[ids_a[i]] - 1) ** 2
            if ids_b[i] == ids_b[j]:
                db += 2 * vb[i] * vb[j] / (cb[ids_b[i]] - 1) ** 2
            if ids_a[i] == ids_a[j] and ids_b[i] == ids_b[j]:
                ci = (t[i] - xa[i]) * (t[i] - xb[i])
                cj = (t[j] - xa[j]) * (t[j] - xb[j])
                cov += 2 * ci * cj / ((ca[ids_a[i]] - 1) * (cb[ids_b[i]] - 1))
    return (da + db - 2 * cov) / n**2, da / n**2


def test_paired_test_statistic_against_a_direct_computation():
    p, rng = softmax_rows(60, 3, 8)
    y = rng.integers(0, 3, 60)
    q = p**0.6
    q /= q.sum(axis=1, keepdims=True)
    res = S.paired_test("ece_ub", p, q, y)
    assert res.test == "jackknife_z" and res.min_p == 0.0 and res.n_permutations == 0
    xa, t = top_label(p, y)
    xb, _ = top_label(q, y)
    ida, idb = width_bin_ids(xa, 15), width_bin_ids(xb, 15)
    ta, tb = brute_t_top(xa, t, ida), brute_t_top(xb, t, idb)
    d_loo = [
        brute_t_top(np.delete(xa, i), np.delete(t, i), np.delete(ida, i))
        - brute_t_top(np.delete(xb, i), np.delete(t, i), np.delete(idb, i))
        for i in range(60)
    ]
    vj = 59 / 60 * np.sum((np.array(d_loo) - np.mean(d_loo)) ** 2)
    excess, d_a = brute_paired_excess(xa, xb, t, ida, idb)
    assert S.ub_jackknife("ece_ub", p, y).excess == pytest.approx(d_a, rel=1e-12)
    z = (ta - tb) / math.sqrt(max(vj - excess, vj / 2))
    assert res.statistic == pytest.approx(z, rel=1e-10)
    from scipy.stats import t as student

    cells = np.unique(ida * 15 + idb, return_counts=True)[1]
    df = int(np.sum(cells >= 2)) - 1
    assert (
        U.paired_excess(S.ub_jackknife("ece_ub", p, y), S.ub_jackknife("ece_ub", q, y))[1] == df + 1
    )
    assert res.p_value == pytest.approx(2 * student.sf(abs(z), df), rel=1e-10)
    assert res.difference == pytest.approx(math.sqrt(max(ta, 0)) - math.sqrt(max(tb, 0)), abs=1e-12)
    same = S.paired_test("ece_ub", p, p, y)
    assert (same.p_value, same.statistic) == (1.0, 0.0)


def test_score_bounds_solve_the_quadratic():
    u = U.UStat(0.004, np.linspace(0.0039, 0.0041, 50), 1e-7, 1e-3)
    z = 1.96
    lo, hi = U.score_bounds(u, z)
    vj = np.var(u.loo) * 49
    a = (vj - 2 * u.excess) / u.t if vj - 2 * u.excess > 0 else u.slope0
    for theta in (lo, hi):
        assert (u.t - theta) ** 2 == pytest.approx(z * z * (a * theta + u.excess), rel=1e-9)
    assert lo < u.t < hi
    # a negative T far below its null spread: no theta >= 0 fits, [0, 0]
    neg = U.UStat(-1.0, np.full(50, -1.0), 1e-7, 1e-3)
    assert U.score_bounds(neg, z) == (0.0, 0.0)


def test_interval_and_upper_bound():
    p, rng = softmax_rows(400, 5, 9)
    y = rng.integers(0, 5, 400)
    for name in ("ece_ub", "ece_ub_mass", "cwece_ub"):
        est, lo, hi = S.ub_interval(name, p, y, 0.95)
        assert est == pytest.approx(METRICS[name](p, y), abs=1e-12)
        assert 0.0 <= lo <= hi
        up = S.ub_upper_bound(name, p, y, 0.95)
        assert lo <= up <= hi  # the one-sided 95% bound uses z_0.95 < z_0.975
        assert S.ub_interval(name, p, y, 0.5)[2] < hi
        ci = S.bootstrap_ci(name, p, y)
        assert (ci.method, ci.low, ci.high, ci.estimate) == ("jackknife", lo, hi, est)
    with pytest.raises(ValueError, match="no jackknife form"):
        S.ub_interval("ece", p, y)
    with pytest.raises(ValueError, match="level"):
        S.ub_interval("ece_ub", p, y, 1.5)
    with pytest.raises(ValueError, match="not built from bootstrap values"):
        S.interval_from_values(0.1, np.ones(3), 0.95, "jackknife")


def test_classwise_interval_withheld_when_classes_are_thin():
    p, rng = softmax_rows(300, 50, 10)  # 6 samples per class
    y = rng.integers(0, 50, 300)
    est, lo, hi = S.ub_interval("cwece_ub", p, y)
    assert est == pytest.approx(METRICS["cwece_ub"](p, y)) and math.isnan(lo) and math.isnan(hi)
    assert math.isnan(S.ub_upper_bound("cwece_ub", p, y))
    assert "fewer than 10 per class" in U.cw_thin_reason(300, 50)
    assert U.cw_thin_reason(500, 50) == ""
    assert not math.isnan(S.ub_interval("ece_ub", p, y)[1])
