"""Verdicts over models (calbench.stats.over_models): a hand-computed win-rate matrix and
improvement, the bootstrap's construction and seeding, input errors, and a cheap coverage
simulation (the full table: perf/bench_over_models.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from calbench.stats.over_models import (
    METHODS,
    WIN_RATE_INTERVAL_MODELS,
    bootstrap_mean_over_models,
    coverage,
    improvement,
    win_outcomes,
    win_rates,
)

NAMES = ["a", "b", "c"]
# 5 models x 3 calibrators, lower is better; a has no score on the 5th model
SCORES = np.array(
    [
        [1.0, 2.0, 3.0],
        [2.0, 1.0, 3.0],
        [1.0, 1.0, 0.0],
        [1.0, 3.0, 2.0],
        [np.nan, 2.0, 1.0],
    ]
)


def test_win_rates_known_answer():
    w = win_rates(SCORES, NAMES, n_boot=200, min_models=1)
    # a vs b: wins on models 1 and 4, loses on 2, ties on 3 (1/2), model 5 does not count
    assert w.of("a", "b")[0] == pytest.approx((1 + 0 + 0.5 + 1) / 4)
    assert w.of("b", "a")[0] == pytest.approx(1 - 2.5 / 4)
    assert w.of("a", "c")[0] == pytest.approx(3 / 4)
    assert w.of("b", "c")[0] == pytest.approx(2 / 5)  # better on models 1 and 2 only
    assert w.n_models.tolist() == [[0, 4, 4], [4, 0, 5], [4, 5, 0]]
    assert np.all(np.isnan(np.diag(w.rate)))
    off = ~np.eye(3, dtype=bool)
    np.testing.assert_allclose((w.rate + w.rate.T)[off], 1.0)
    assert np.all((w.low <= w.rate)[off] & (w.rate <= w.high)[off])


def test_win_rates_get_intervals_from_20_models_only():
    """Below WIN_RATE_INTERVAL_MODELS models the BCa win-rate interval undercovers (0.80-0.84 at
    10 models through the pipeline): the rate stays, the bounds are NaN; from 20 models on the
    pair gets its interval."""
    assert WIN_RATE_INTERVAL_MODELS == 20
    rng = np.random.default_rng(0)
    few = win_rates(rng.normal(size=(19, 3)), NAMES, n_boot=200)
    off = ~np.eye(3, dtype=bool)
    assert np.all(np.isfinite(few.rate[off]))
    assert np.all(np.isnan(few.low)) and np.all(np.isnan(few.high))
    enough = win_rates(rng.normal(size=(20, 3)), NAMES, n_boot=200)
    assert np.all(np.isfinite(enough.low[off]) & np.isfinite(enough.high[off]))
    # a pair counts its own models: a NaN score on one model drops that pair below 20
    s = rng.normal(size=(20, 3))
    s[0, 2] = np.nan
    part = win_rates(s, NAMES, n_boot=200)
    assert np.isfinite(part.low[0, 1]) and np.isnan(part.low[0, 2]) and np.isnan(part.low[1, 2])


def test_higher_is_better_reverses_the_wins():
    lo = win_rates(SCORES, NAMES, n_boot=200)
    hi = win_rates(SCORES, NAMES, higher_is_better=True, n_boot=200)
    np.testing.assert_allclose(hi.rate, lo.rate.T)


def test_improvement_known_answer():
    imp = improvement(SCORES, NAMES, baseline="c", n_boot=200)
    # c - a: 2, 1, -1, 1 (model 5 does not count); c - b: 1, 2, -1, -1, -1
    assert imp.of("a")[0] == pytest.approx(0.75) and imp.n_models.tolist() == [4, 5, 5]
    assert imp.of("b")[0] == pytest.approx(0.0)
    assert imp.of("c") == (0.0, 0.0, 0.0)
    up = improvement(SCORES, NAMES, baseline="c", higher_is_better=True, n_boot=200)
    assert up.of("a")[0] == pytest.approx(-0.75)


def test_win_outcomes_ties_are_half():
    out = win_outcomes([[1.0, 1.0, 2.0]])
    assert out[0, 0, 1] == 0.5 and out[0, 0, 2] == 1.0 and out[0, 2, 0] == 0.0


@pytest.mark.parametrize("method", ["percentile", "bca", "studentized"])
def test_interval_is_seeded_and_contains_the_mean(method):
    x = np.random.default_rng(3).gamma(2.0, 1.0, (40, 2))
    ci = bootstrap_mean_over_models(x, n_boot=500, seed=7, method=method)
    again = bootstrap_mean_over_models(x, n_boot=500, seed=7, method=method)
    other = bootstrap_mean_over_models(x, n_boot=500, seed=8, method=method)
    np.testing.assert_array_equal(ci.low, again.low)
    assert not np.array_equal(ci.low, other.low)
    np.testing.assert_allclose(ci.estimate, x.mean(axis=0))
    assert np.all(ci.low < ci.estimate) and np.all(ci.estimate < ci.high)


def test_percentile_interval_is_the_quantiles_of_the_resampled_means():
    # the documented construction: resample b draws rng.integers(0, M, M) (rows of one
    # (n_boot, M) draw) from numpy.random.default_rng(seed)
    x = np.random.default_rng(0).normal(size=25)
    idx = np.random.default_rng(5).integers(0, 25, size=(300, 25))
    lo, hi = np.quantile(x[idx].mean(axis=1), [0.025, 0.975])
    ci = bootstrap_mean_over_models(x, n_boot=300, seed=5, method="percentile")
    assert ci.low[0] == pytest.approx(lo, rel=1e-12) and ci.high[0] == pytest.approx(hi, rel=1e-12)


def test_constant_values_give_a_point_interval_and_thin_columns_nan():
    x = np.array([[0.5, 1.0], [0.5, np.nan], [0.5, np.nan]])
    ci = bootstrap_mean_over_models(x, n_boot=200)
    assert (ci.low[0], ci.high[0]) == (0.5, 0.5)
    assert ci.estimate[1] == 1.0 and np.isnan(ci.low[1]) and ci.n_models.tolist() == [3, 1]


def test_a_thousand_models_and_twenty_calibrators():
    s = np.random.default_rng(1).normal(size=(1000, 20))
    w = win_rates(s, [f"c{i}" for i in range(20)], n_boot=200)
    assert w.rate.shape == (20, 20)
    assert np.nanmax(np.abs(w.rate - 0.5)) < 0.06  # exchangeable calibrators: rates near 1/2


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: win_rates(SCORES, ["a", "b"]), "3 columns|2 columns"),
        (lambda: win_rates(SCORES, ["a", "a", "b"]), "distinct"),
        (lambda: improvement(SCORES, NAMES, baseline="u"), "baseline 'u'"),
        (lambda: bootstrap_mean_over_models([1.0]), "M >= 2"),
        (lambda: bootstrap_mean_over_models([1.0, np.inf]), "infinite"),
        (lambda: bootstrap_mean_over_models([1.0, 2.0], level=0.2), "level"),
        (lambda: bootstrap_mean_over_models([1.0, 2.0], n_boot=10), "n_boot"),
        (lambda: bootstrap_mean_over_models([1.0, 2.0], method="basic"), "method"),
        (lambda: bootstrap_mean_over_models([1.0, 2.0], seed=-1), "seed"),
    ],
)
def test_bad_input_is_a_one_line_error(call, match):
    with pytest.raises(ValueError, match=match) as info:
        call()
    assert "\n" not in str(info.value)


def test_coverage_at_twenty_models():
    # the defaults on a skewed improvement (gamma, shape 2, mean 2) and on win outcomes; 200
    # studies give a binomial standard error of ~1.5 points at 95%
    gamma = coverage(lambda g: g.gamma(2.0, 1.0, 20), 2.0, studies=200, method="studentized")
    wins = coverage(
        lambda g: g.choice([0.0, 0.5, 1.0], size=20, p=[0.25, 0.1, 0.65]), 0.7, studies=200,
        method="bca",
    )  # fmt: skip
    assert 0.90 <= gamma <= 0.99 and 0.90 <= wins <= 0.99, (gamma, wins)


def test_equal_differences_that_round_differently_give_a_point_interval():
    # 0.3 - 0.25 on every model: the resampled means differ from the estimate by rounding
    # only, which must not give the bootstrap-t a zero standard error (a NaN interval)
    scores = np.tile([0.3, 0.25, 0.1], (80, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for method in METHODS:
            g = improvement(scores, ["u", "t", "g"], "u", method=method)
            assert np.isfinite(g.low).all() and np.isfinite(g.high).all()
            np.testing.assert_allclose(g.low, g.mean, rtol=0, atol=1e-12)
            np.testing.assert_allclose(g.high, g.mean, rtol=0, atol=1e-12)
