"""calbench.stats.signed_rank: Wilcoxon's signed-rank test for any number of pairs, exact
(counted) up to EXACT_MAX differences and the normal approximation with the tie correction
beyond, checked against brute-force enumeration and scipy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from calbench.stats import mean_ranks
from calbench.stats.signed_rank import EXACT_MAX, signed_rank_test


def _enumerated(d):
    """The exact two-sided p-value by enumerating all 2^n sign assignments (the definition)."""
    d = np.asarray(d, dtype=np.float64)
    d = d[d != 0]
    r = mean_ranks(np.abs(d))
    mu = r.sum() / 2.0
    observed = abs(float(r[d > 0].sum()) - mu)
    half = r.shape[0] // 2  # every assignment: (signs of the first half) x (of the second)
    lo, hi = (
        np.array(list(itertools.product((0.0, 1.0), repeat=part.shape[0]))) @ part
        for part in (r[:half], r[half:])
    )
    w = (lo[:, None] + hi[None, :]).ravel()
    return float(np.mean(np.abs(w - mu) >= observed - 1e-9))


def test_known_answers():
    t = signed_rank_test([1, 2, 3, 4, 5, 6])
    assert (t.p_value, t.floor, t.statistic, t.n, t.method) == (2 / 64, 2 / 64, 21.0, 6, "exact")
    # ranks 1, 2, 3; W+ = 4, mu = 3: subset sums 0,1,2,3,3,4,5,6 -> 6 of 8 with |W - 3| >= 1
    t = signed_rank_test([0.1, -0.2, 0.3])
    assert (t.p_value, t.floor) == (0.75, 0.25)
    t = signed_rank_test([0.0, 0.0])
    assert (t.p_value, t.floor, t.n, t.method) == (1.0, 1.0, 0, "none")
    # ties share mean ranks: |d| = 1, 1 -> ranks 1.5, 1.5; W+ = 3 = max: p = 2/4
    assert signed_rank_test([1.0, 1.0]).p_value == 0.5


@pytest.mark.parametrize("seed", range(4))
def test_the_count_is_the_enumeration_bit_for_bit(seed):
    """At n = 12 and at the old limit n = 20, with ties and zeros, the convolution counts the
    same sign assignments as the enumeration (the same float, not merely close)."""
    rng = np.random.default_rng(seed)
    for n in (12, 20):
        d = rng.integers(-4, 5, size=n).astype(float) / 8  # many ties, some zeros
        d[0] = 0.5 if not np.any(d) else d[0]
        assert signed_rank_test(d).p_value == _enumerated(d)
    d = rng.normal(size=20)
    assert signed_rank_test(d).p_value == _enumerated(d)


def test_exact_agrees_with_scipy_without_ties_and_normal_with_ties():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    for n in (40, 300):
        d = rng.normal(0.15, 1.0, size=n)  # no ties, no zeros: scipy's exact distribution
        ours = signed_rank_test(d)
        assert ours.method == "exact"
        assert ours.p_value == pytest.approx(stats.wilcoxon(d, method="exact").pvalue, rel=1e-9)
    for n in (EXACT_MAX + 50, 800):
        d = np.round(rng.normal(0.1, 1.0, size=n), 1)  # ties and zeros
        ours = signed_rank_test(d)
        ref = stats.wilcoxon(d, zero_method="wilcox", correction=False, method="approx")
        assert ours.method == "normal" and ours.n > EXACT_MAX
        assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-10)
        w_minus = ours.n * (ours.n + 1) / 2 - ours.statistic
        assert min(ours.statistic, w_minus) == pytest.approx(ref.statistic)


def test_the_boundary_and_beyond():
    """EXACT_MAX differences get the exact p-value; one more switches to the approximation,
    within 2e-3 of the exact one there; 21, 80 and 800 differences get a test (the old
    enumeration refused n > 20)."""
    rng = np.random.default_rng(5)
    d = rng.normal(0.1, 1.0, size=EXACT_MAX)
    exact = signed_rank_test(d)
    assert exact.method == "exact" and exact.floor == 2.0 / 2**EXACT_MAX
    assert signed_rank_test(d, method="normal").p_value == pytest.approx(exact.p_value, abs=2e-3)
    beyond = signed_rank_test(np.append(d, 0.7))
    assert beyond.method == "normal" and beyond.n == EXACT_MAX + 1
    assert 0 < beyond.floor < 1e-9  # all signs positive: z = mu / sd
    for n in (21, 80, 800):
        t = signed_rank_test(np.arange(1, n + 1, dtype=float))  # all positive
        assert t.p_value == t.floor and t.p_value < 1e-4
    with pytest.raises(ValueError, match="at most 400 differences, got 401"):
        signed_rank_test(np.append(d, 0.7), method="exact")
    with pytest.raises(ValueError, match="method must be one of"):
        signed_rank_test(d, method="enumerate")


def test_nan_gives_an_undefined_test():
    t = signed_rank_test([1.0, np.nan, 2.0])
    assert np.isnan(t.p_value) and np.isnan(t.statistic)


def test_type_one_error_at_alpha():
    """Under H0 (symmetric differences, ties and zeros from rounding) both tests at 60 pairs
    reject about alpha of the time: 1500 simulated studies, rejection rates within
    0.05 +- 0.019 (about 3.4 binomial standard errors), the exact one never above alpha by
    more than that (it is exact: at most alpha in expectation)."""
    rng = np.random.default_rng(11)
    d = np.round(rng.normal(size=(1500, 60)), 1) * rng.choice((-1.0, 1.0), size=(1500, 60))
    for method in ("exact", "normal"):
        rate = np.mean([signed_rank_test(row, method).p_value < 0.05 for row in d])
        assert abs(rate - 0.05) < 0.019, (method, rate)
