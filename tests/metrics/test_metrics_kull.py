"""Kull et al. 2019 metric conventions (``*_kull``) against rebuilds of their definitions.

The references below follow the definitions of dirichletcal/experiments_dnn
``scripts/utility/evaluation.py`` (2019 state: classwise ECE summed over classes) sample by
sample in plain Python loops, independently of calbench's vectorised code.
"""

from __future__ import annotations

import numpy as np
import pytest

from calbench.metrics import METRICS, brier, nll
from calbench.stats import bootstrap_ci


def ref_confidence_bins(conf, correct, n_bins=15):
    """[(acc, mean conf, count)] per bin: upper bounds arange(w, 1 + w, w), bin (u - w, u], the
    bin whose lower bound is 0 also holding 0."""
    w = 1 / n_bins
    out = []
    for u in np.arange(w, 1 + w, w):
        lo = u - w
        members = [i for i in range(len(conf)) if (conf[i] > lo or lo == 0) and conf[i] <= u]
        if not members:
            out.append((0.0, 0.0, 0))
            continue
        acc = sum(correct[i] for i in members) / len(members)
        avg = sum(float(conf[i]) for i in members) / len(members)
        out.append((acc, avg, len(members)))
    return out


def ref_ece(p, y):
    conf, correct = p.max(axis=1), (p.argmax(axis=1) == y)
    return sum(abs(a - c) * n / len(y) for a, c, n in ref_confidence_bins(conf, correct))


def ref_mce(p, y):
    conf, correct = p.max(axis=1), (p.argmax(axis=1) == y)
    return max(abs(a - c) for a, c, _ in ref_confidence_bins(conf, correct))


def ref_cwece_sum(p, y, n_bins=15):
    total = 0.0
    for j in range(p.shape[1]):
        idx = np.digitize(p[:, j], np.linspace(0, 1, n_bins)) - 1
        t = (y == j).astype(float)
        for b in np.unique(idx):
            m = idx == b
            total += abs(np.mean(p[m, j]) - np.mean(t[m])) * m.sum() / len(y)
    return total


def ref_brier_div_k(p, y):
    n, k = p.shape
    s = 0.0
    for i in range(n):
        for j in range(k):
            s += (float(p[i, j]) - (1.0 if j == y[i] else 0.0)) ** 2
    return s / n / k


def probs(n, k, seed, conc=0.3):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.full(k, conc), n), rng.integers(0, k, n)


@pytest.mark.parametrize(("n", "k", "seed"), [(300, 10, 0), (200, 100, 1), (500, 3, 2)])
def test_kull_metrics_equal_rebuilds_of_their_definitions(n, k, seed):
    p, y = probs(n, k, seed)
    assert METRICS["ece_kull"](p, y) == pytest.approx(ref_ece(p, y), rel=1e-12, abs=1e-15)
    assert METRICS["mce_kull"](p, y) == pytest.approx(ref_mce(p, y), rel=1e-12, abs=1e-15)
    assert METRICS["cwece_kull"](p, y) == pytest.approx(ref_cwece_sum(p, y), rel=1e-10)
    assert METRICS["brier_kull"](p, y) == pytest.approx(ref_brier_div_k(p, y), rel=1e-12)
    assert METRICS["nll_kull"](p, y) == nll(p, y, rule="study")
    assert METRICS["brier_kull"](p, y) == pytest.approx(brier(p, y) / k, rel=1e-14)


def test_float32_probabilities_and_exact_edges():
    p, y = probs(400, 10, 3)
    p = p.astype(np.float32)
    # put confidences and class probabilities exactly on bin edges, 0 and 1
    p[0] = 0.0
    p[0, 3] = 1.0
    p[1] = 0.0
    p[1, [1, 2]] = [np.float32(2 / 15), np.float32(13 / 15)]
    p[2] = 0.1
    for name, ref in [("ece_kull", ref_ece), ("mce_kull", ref_mce), ("cwece_kull", ref_cwece_sum)]:
        # the reference's np.mean of float32 columns accumulates in float32; calbench in float64
        assert METRICS[name](p, y) == pytest.approx(ref(p, y), rel=1e-7, abs=1e-12), name


def test_hand_computed_example():
    # confidences 0.5 (correct), 0.5 (wrong), 1.0 (correct), 2/15 exactly (wrong; K=10 row)
    k = 10
    p = np.full((4, k), 0.0)
    p[0, :2] = [0.5, 0.5]
    p[1, :2] = [0.5, 0.5]
    p[2, 4] = 1.0
    p[3] = (1 - 2 / 15) / 9
    p[3, 7] = 2 / 15
    y = np.array([0, 1, 4, 0])
    # sample 1's argmax is class 0 (first of ties), wrong; sample 3 predicts class 7, wrong.
    # bins (lo, hi]: 0.5 in (7/15, 8/15]: acc 1/2, conf 0.5 -> gap 0; 1.0 in (14/15, 1]: gap 0;
    # 2/15 in (1/15, 2/15] (closed on the right): acc 0, conf 2/15 -> 2/15 * 1/4
    assert METRICS["ece_kull"](p, y) == pytest.approx((2 / 15) / 4, rel=1e-12)
    assert METRICS["mce_kull"](p, y) == pytest.approx(2 / 15, rel=1e-12)
    # the study's [a, b) bins put 2/15 in bin [2/15, 3/15): same ECE here, other bin
    # Brier / K: rows 0-2 contribute 0.5, 0.5 + ... computed directly
    want = ((0.5**2 + 0.5**2) * 2 + 0 + ((p[3] - np.eye(k)[0]) ** 2).sum()) / 4 / k
    assert METRICS["brier_kull"](p, y) == pytest.approx(want, rel=1e-12)
    # classwise, class 4: p in bin 0 ([0, 1/14)) for rows 0, 1, 3 (targets 0) and the p == 1 bin
    # for row 2 (target 1): both gaps 0 except bin 0's mean p = (2/15 ... ) -> rebuilt exactly
    assert METRICS["cwece_kull"](p, y) == pytest.approx(ref_cwece_sum(p, y), rel=1e-12)


def test_cwece_kull_bootstrap_uses_weights_consistently():
    p, y = probs(200, 10, 5)
    res = bootstrap_ci(METRICS["cwece_kull"], p, y, n_resamples=20, seed=0, method="percentile")
    idx = np.random.default_rng(0).integers(0, 200, size=(20, 200))
    vals = [METRICS["cwece_kull"](p[i], y[i]) for i in idx]
    assert min(vals) - 1e-12 <= res.low <= res.high <= max(vals) + 1e-12
