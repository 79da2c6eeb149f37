"""Tests for calbench.stats: percentile bootstrap intervals and paired comparisons."""

import numpy as np
import pytest

import calbench.metrics as M
from calbench.metrics import METRICS
from calbench.stats import BootstrapCI, PairedBootstrap, bootstrap_ci, paired_bootstrap


def random_probs(n, k, seed, scale=2.0):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, k)) * scale
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True), rng.integers(0, k, n)


def calibrated(n, k, seed):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(k, 0.5), size=n)
    y = np.minimum((p.cumsum(axis=1) < rng.random((n, 1))).sum(axis=1), k - 1)
    return p, y


def sharpen(p, t):
    q = p**t
    return q / q.sum(axis=1, keepdims=True)


def test_degenerate_sample_gives_point_interval():
    probs = np.tile([0.8, 0.2], (50, 1))
    labels = np.zeros(50, dtype=int)
    ci = bootstrap_ci("accuracy", probs, labels, n_resamples=100)
    assert isinstance(ci, BootstrapCI)
    assert (ci.estimate, ci.low, ci.high) == (1.0, 1.0, 1.0)
    assert (ci.level, ci.n_resamples) == (0.95, 100)
    # ECE is |1 - .8| in every resample
    ci = bootstrap_ci(METRICS["ece"], probs, labels, n_resamples=50)
    assert ci.low == pytest.approx(0.2) and ci.high == pytest.approx(0.2)


@pytest.mark.parametrize(
    "name", ["accuracy", "ece", "ace", "nll", "ks", "dece", "cwece", "marginal_ce"]
)
def test_fast_path_equals_generic_path(name):
    # registry metrics resample per-sample arrays; a plain function resamples the (N, K)
    # input. Same seed -> same indices -> the same interval.
    probs, labels = random_probs(300, 4, 0)
    metric = METRICS[name]
    fast = bootstrap_ci(metric, probs, labels, n_resamples=60, seed=3)
    slow = bootstrap_ci(lambda p, y: metric(p, y), probs, labels, n_resamples=60, seed=3)
    assert fast.estimate == pytest.approx(slow.estimate, abs=1e-12)
    assert fast.low == pytest.approx(slow.low, abs=1e-12)
    assert fast.high == pytest.approx(slow.high, abs=1e-12)


def test_interval_is_percentile_of_resamples():
    # with a callable that records every resampled value, the bounds are its quantiles
    probs, labels = random_probs(200, 3, 1)
    seen = []

    def metric(p, y):
        v = M.brier(p, y)
        seen.append(v)
        return v

    ci = bootstrap_ci(metric, probs, labels, n_resamples=80, level=0.9, seed=5)
    values = np.array(seen[1:])  # the first call is the point estimate
    assert len(values) == 80
    assert ci.estimate == seen[0] == M.brier(probs, labels)
    assert ci.low == pytest.approx(np.quantile(values, 0.05))
    assert ci.high == pytest.approx(np.quantile(values, 0.95))


@pytest.mark.parametrize("name", ["accuracy", "nll", "brier"])
def test_coverage_near_nominal(name):
    # a model that always says [.8, .2] for class 0, true P(y = 0) = .7: the population
    # values are known exactly
    truth = {
        "accuracy": 0.7,
        "nll": -(0.7 * np.log(0.8) + 0.3 * np.log(0.2)),
        "brier": 0.7 * 2 * 0.2**2 + 0.3 * 2 * 0.8**2,
    }[name]
    rng = np.random.default_rng(123)
    n, reps = 150, 200
    probs = np.tile([0.8, 0.2], (n, 1))
    hits = 0
    for r in range(reps):
        labels = (rng.random(n) >= 0.7).astype(int)
        ci = bootstrap_ci(name, probs, labels, n_resamples=300, seed=r)
        hits += ci.low <= truth <= ci.high
    # nominal .95; binomial sd over 200 reps is ~.015
    assert 0.89 <= hits / reps <= 0.99


def test_reproducible_with_seed():
    probs, labels = random_probs(500, 5, 2)
    a = bootstrap_ci("ece", probs, labels, n_resamples=200, seed=7)
    b = bootstrap_ci("ece", probs, labels, n_resamples=200, seed=7)
    c = bootstrap_ci("ece", probs, labels, n_resamples=200, seed=8)
    assert a == b
    assert (a.low, a.high) != (c.low, c.high)
    pa = paired_bootstrap("ece", probs, sharpen(probs, 2), labels, n_resamples=100, seed=1)
    pb = paired_bootstrap("ece", probs, sharpen(probs, 2), labels, n_resamples=100, seed=1)
    assert pa == pb


def test_paired_identical_inputs_give_exact_zero():
    probs, labels = random_probs(400, 5, 3)
    for name in ("ece", "cwece", "nll"):
        res = paired_bootstrap(name, probs, probs.copy(), labels, n_resamples=100)
        assert isinstance(res, PairedBootstrap)
        assert (res.difference, res.low, res.high, res.p_value) == (0.0, 0.0, 0.0, 1.0)


def test_paired_uses_the_same_indices_for_both():
    # b changes only the confidences, not the argmax: the accuracy difference is 0 in every
    # resample only if a and b see the same samples
    probs, labels = random_probs(400, 5, 4)
    res = paired_bootstrap("accuracy", probs, sharpen(probs, 3), labels, n_resamples=200)
    assert (res.low, res.high, res.difference) == (0.0, 0.0, 0.0)


def test_paired_detects_clearly_better_calibrator():
    probs, labels = calibrated(3000, 5, 5)
    over = sharpen(probs, 3.0)  # badly overconfident, same predictions
    res = paired_bootstrap("ece", probs, over, labels, n_resamples=300, seed=0)
    assert res.difference == pytest.approx(M.ece(probs, labels) - M.ece(over, labels))
    assert res.difference < 0 and res.high < 0  # CI excludes 0
    assert res.p_value <= 2 / 300
    rev = paired_bootstrap("ece", over, probs, labels, n_resamples=300, seed=0)
    assert rev.low > 0 and rev.difference == pytest.approx(-res.difference)


def test_paired_p_value_definition():
    # two calibrators of similar quality: p is twice the smaller tail share of the
    # resampled differences, so it lies in (0, 1] and the CI contains 0
    probs, labels = calibrated(500, 4, 6)
    other = sharpen(probs, 1.02)
    res = paired_bootstrap("nll", probs, other, labels, n_resamples=400, seed=2)
    assert res.low <= 0 <= res.high
    assert 0.05 < res.p_value <= 1.0


def test_bad_options():
    probs, labels = random_probs(30, 3, 7)
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_ci("ece", probs, labels, n_resamples=0)
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci("ece", probs, labels, level=95)
    with pytest.raises(ValueError, match="seed"):
        bootstrap_ci("ece", probs, labels, seed=-1)
    with pytest.raises(ValueError, match="unknown metric"):
        bootstrap_ci("ECE", probs, labels)
    with pytest.raises(ValueError, match="callable"):
        bootstrap_ci(3, probs, labels)
    with pytest.raises(ValueError, match="logits"):
        bootstrap_ci("ece", np.log(probs), labels)
    with pytest.raises(ValueError, match="shape"):
        paired_bootstrap("ece", probs, probs[:, :2] / probs[:, :2].sum(1, keepdims=True), labels)
    with pytest.raises(ValueError, match="probs_b"):
        paired_bootstrap("ece", probs, probs * 2, labels)
