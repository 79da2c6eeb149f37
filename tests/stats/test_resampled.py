"""Tests across repeated partitions (calbench.stats.resampled): known answers, input errors, and
the corrected repeated-cv t-test's type-I error under a simulated null of two fitted predictors
of equal population error on the same samples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from calbench.crossfit import fold_assignments
from calbench.stats.resampled import (
    corrected_repeated_cv_t,
    corrected_resampled_t,
    fold_differences,
    variance_split,
    verdict_share,
    winner_share,
)


def test_corrected_resampled_t_known_answer():
    # d = 1, 2, 3: mean 2, s^2 = 1; J = 3, n_test / n_train = 1/2: t = 2 / sqrt(1/3 + 1/2)
    res = corrected_resampled_t([1.0, 2.0, 3.0], n_train=20, n_test=10)
    t = 2.0 / math.sqrt(1.0 / 3.0 + 0.5)
    assert res.difference == 2.0
    assert res.statistic == pytest.approx(t, rel=1e-12)
    assert res.df == 2 and res.n_runs == 3 and res.correction == 0.5
    assert res.p_value == pytest.approx(2 * sps.t.sf(t, 2), rel=1e-10)


def test_correction_widens_the_plain_t_test():
    d = np.random.default_rng(0).normal(0.3, 1.0, 30)
    plain = sps.ttest_1samp(d, 0.0)
    # a vanishing n_test / n_train gives the plain one-sample t-test back
    tiny = corrected_resampled_t(d, n_train=10**12, n_test=1)
    assert tiny.statistic == pytest.approx(plain.statistic, rel=1e-9)
    assert tiny.p_value == pytest.approx(plain.pvalue, rel=1e-6)
    assert corrected_resampled_t(d, n_train=90, n_test=10).p_value > plain.pvalue


def test_corrected_repeated_cv_t_uses_the_fold_values_and_one_over_f_minus_one():
    fd = np.array([[1.0, 2.0, 3.0, 4.0], [0.0, 2.0, 2.0, 4.0]])  # R = 2, F = 4
    res = corrected_repeated_cv_t(fd)
    flat = fd.ravel()
    t = flat.mean() / math.sqrt((1 / 8 + 1 / 3) * flat.var(ddof=1))
    assert res.statistic == pytest.approx(t, rel=1e-12)
    assert res.df == 7 and res.correction == pytest.approx(1 / 3)


def test_equal_differences_give_p_one_or_zero():
    assert corrected_resampled_t([0.0, 0.0], 9, 1).p_value == 1.0
    res = corrected_resampled_t([0.5, 0.5, 0.5], 9, 1)
    assert res.p_value == 0.0 and res.statistic == math.inf


def test_fold_differences_known_answer():
    d = np.array([[1.0, 2.0, 3.0, 5.0], [4.0, 4.0, 0.0, 2.0]])
    a = np.array([[0, 1, 0, 1], [1, 1, 0, 0]])
    np.testing.assert_allclose(fold_differences(d, a), [[2.0, 3.5], [1.0, 4.0]])


def test_variance_split_known_answer():
    # partitions' pooled differences 2 and 4: between = var([2, 4]) = 2; within: each
    # partition's var([x, x + 2]) / 2 = 2 / 2 = 1
    vs = variance_split([[1.0, 3.0], [3.0, 5.0]])
    assert (vs.difference, vs.between, vs.within, vs.n_partitions) == (3.0, 2.0, 1.0, 2)
    assert vs.between_share == pytest.approx(2 / 3)
    assert math.isnan(variance_split([[1.0, 1.0], [1.0, 1.0]]).between_share)


def test_winner_share_splits_ties_and_never_crowns_nan():
    scores = [[1.0, 2.0, 3.0], [2.0, 1.0, 3.0], [1.0, 1.0, 3.0], [np.nan, 5.0, 4.0]]
    got = winner_share(scores, ["a", "b", "c"])
    assert got == pytest.approx({"a": 1.5 / 4, "b": 1.5 / 4, "c": 1 / 4})
    up = winner_share(scores, ["a", "b", "c"], higher_is_better=True)
    assert up == pytest.approx({"a": 0.0, "b": 0.25, "c": 0.75})


def test_verdict_share():
    assert verdict_share(np.array([0.01, 0.2, 0.03, 0.5]) < 0.05) == 0.5


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: corrected_resampled_t([1.0], 9, 1), "1-D array of >= 2"),
        (lambda: corrected_resampled_t([1.0, np.nan], 9, 1), "NaN"),
        (lambda: corrected_resampled_t([1.0, 2.0], 0, 1), "n_train must be a positive"),
        (lambda: corrected_repeated_cv_t([[1.0], [2.0]]), "F >= 2"),
        (lambda: variance_split([[1.0, 2.0]]), "repeats >= 2"),
        (lambda: fold_differences([[1.0, 2.0]], [[0, 0, 1]]), r"\(R, N\)"),
        (lambda: fold_differences([[1.0, 2.0, 3.0]], [[0, 2, 2]]), "empty fold"),
        (lambda: verdict_share([1, 0]), "boolean"),
        (lambda: winner_share([[1.0, 2.0]], ["a"]), "C = 1"),
        (lambda: winner_share([[np.nan, np.nan]], ["a", "b"]), "no finite score"),
    ],
)
def test_bad_input_is_a_one_line_error(call, match):
    with pytest.raises(ValueError, match=match) as info:
        call()
    assert "\n" not in str(info.value)


def _null_simulation(sims: int, n: int, repeats: int, folds: int, seed: int = 1):
    """Per-sample out-of-fold squared-error differences ``(sims, R, N)`` of two least-squares
    predictors ``beta_hat * a`` and ``beta_hat * b`` of ``y = a + b + e`` (``a``, ``b``, ``e``
    standard normal), each slope fitted on the training folds: by the symmetry of ``a`` and
    ``b`` their population errors are equal, and the paired values share ``y``."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((2, sims, n))
    y = a + b + rng.standard_normal((sims, n))
    assignment = fold_assignments(n, folds, repeats, 0, stratified=False)

    def loss(x):
        out = np.empty((sims, repeats, n))
        for r, row in enumerate(assignment):
            onehot = np.eye(folds)[row]
            xy, xx = (x * y) @ onehot, (x * x) @ onehot
            beta = (xy.sum(1, keepdims=True) - xy) / (xx.sum(1, keepdims=True) - xx)
            out[:, r] = (y - beta[:, row] * x) ** 2
        return out

    return loss(a) - loss(b), assignment


def test_corrected_repeated_cv_t_holds_its_level_where_the_plain_tests_do_not():
    d, assignment = _null_simulation(sims=1000, n=100, repeats=10, folds=5)
    corrected, plain_folds, plain_pooled = [], [], []
    for s in range(d.shape[0]):
        fd = fold_differences(d[s], assignment)
        corrected.append(corrected_repeated_cv_t(fd).p_value < 0.05)
        plain_folds.append(sps.ttest_1samp(fd.ravel(), 0.0).pvalue < 0.05)
        plain_pooled.append(sps.ttest_1samp(d[s].mean(axis=1), 0.0).pvalue < 0.05)
    # measured: 0.043 (corrected), 0.59 (R F fold values as independent), 0.94 (R pooled values)
    assert 0.02 <= np.mean(corrected) <= 0.075
    assert np.mean(plain_folds) > 0.3 and np.mean(plain_pooled) > 0.5
