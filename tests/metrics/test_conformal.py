"""Split-conformal LAC and APS sets (Sadinle et al. 2019; Romano et al. 2020)."""

import numpy as np
import pytest

from calbench.metrics.conformal import (
    class_scores,
    conformal_quantile,
    conformal_sets,
    lac_coverage,
    split_halves,
)


def test_quantile_rule_by_hand():
    s = np.arange(1.0, 10.0)  # m = 9, alpha = 0.1: ceil(10 * 0.9) = 9th smallest
    assert conformal_quantile(s, 0.1) == 9.0
    assert conformal_quantile(s, 0.2) == 8.0  # ceil(8) = 8
    assert conformal_quantile(s[:5], 0.1) == np.inf  # ceil(6 * 0.9) = 6 > 5


def test_aps_scores_by_hand():
    p = np.array([[0.5, 0.3, 0.2]])
    np.testing.assert_allclose(class_scores(p, "aps"), [[0.5, 0.8, 1.0]])
    np.testing.assert_allclose(class_scores(p, "lac"), [[0.5, 0.7, 0.8]])


def _brute(p, y, method):
    cal, ev = split_halves(y.size)
    if method == "lac":
        sc = [1 - p[i, y[i]] for i in cal]
    else:
        sc = [
            sum(p[i, j] for j in range(p.shape[1]) if (p[i, j], -j) >= (p[i, y[i]], -y[i]))
            for i in cal
        ]
    r = int(np.ceil((len(cal) + 1) * 0.9))
    q = sorted(sc)[r - 1]
    cover, size = [], []
    for i in ev:
        if method == "lac":
            s = {j for j in range(p.shape[1]) if 1 - p[i, j] <= q}
        else:
            s = {j for j in range(p.shape[1])
                 if sum(p[i, m] for m in range(p.shape[1]) if (p[i, m], -m) >= (p[i, j], -j)) <= q}  # fmt: skip
        cover.append(y[i] in s)
        size.append(len(s))
    return np.mean(cover), np.mean(size)


@pytest.mark.parametrize("method", ["lac", "aps"])
def test_equals_brute_force(method):
    rng = np.random.default_rng(1)
    z = rng.normal(size=(301, 5)) * 2
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = np.array([rng.choice(5, p=r) for r in p])
    cov, size = conformal_sets(p, y, method)
    bcov, bsize = _brute(p, y, method)
    assert cov == pytest.approx(bcov, abs=1e-12) and size == pytest.approx(bsize, abs=1e-12)


def test_coverage_is_valid_on_average():
    # exchangeable data: coverage averaged over many draws is >= 90% (and below 90% + 1/(m+1) + noise)
    rng = np.random.default_rng(2)
    covs = []
    for _ in range(200):
        z = rng.normal(size=(200, 4))
        p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
        y = rng.integers(0, 4, 200)  # labels unrelated to p: sets must still cover
        covs.append(lac_coverage(p, y))
    assert 0.895 <= np.mean(covs) <= 0.92


def test_bad_method():
    with pytest.raises(ValueError, match="method must be one of"):
        conformal_sets(np.full((4, 2), 0.5), np.array([0, 1, 0, 1]), "raps")
