"""Tests for calbench.stats: bootstrap intervals, paired comparisons, Holm, Friedman, Nemenyi."""

import numpy as np
import pytest

import calbench.metrics as M
from calbench import stats as S
from calbench.metrics import METRICS
from calbench.stats import BootstrapCI, PairedBootstrap, bootstrap_ci, paired_bootstrap
from calbench.synthetic import (
    SyntheticModel,
    population_errors,
    population_reliability,
    population_scores,
    variant,
)


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
    # ECE is |1 - .8| in every resample: the basic interval is the point, the default
    # one-sided upper bound [0, 0.2]
    ci = bootstrap_ci(METRICS["ece"], probs, labels, n_resamples=50, method="basic")
    assert ci.low == pytest.approx(0.2) and ci.high == pytest.approx(0.2)
    ci = bootstrap_ci(METRICS["ece"], probs, labels, n_resamples=50, method="upper")
    assert (ci.method, ci.low) == ("upper", 0.0) and ci.high == pytest.approx(0.2)


@pytest.mark.parametrize(
    "name", ["accuracy", "ece", "ace", "nll", "ks", "dece", "cwece", "marginal_ce"]
)
def test_fast_path_equals_generic_path(name):
    # registry metrics resample per-sample arrays; a plain function resamples the (N, K)
    # input. Same seed -> same indices -> the same interval.
    probs, labels = random_probs(300, 4, 0)
    metric = METRICS[name]
    method = S.interval_method(name) or "basic"
    fast = bootstrap_ci(metric, probs, labels, n_resamples=60, seed=3, method=method)
    slow = bootstrap_ci(
        lambda p, y: metric(p, y), probs, labels, n_resamples=60, seed=3, method=method
    )
    assert fast.method == method
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
    a = bootstrap_ci("ece", probs, labels, n_resamples=200, method="basic", seed=7)
    b = bootstrap_ci("ece", probs, labels, n_resamples=200, method="basic", seed=7)
    c = bootstrap_ci("ece", probs, labels, n_resamples=200, method="basic", seed=8)
    assert a == b
    assert (a.low, a.high) != (c.low, c.high)
    pa = paired_bootstrap(
        "ece", probs, sharpen(probs, 2), labels, n_resamples=100, method="basic", seed=1
    )
    pb = paired_bootstrap(
        "ece", probs, sharpen(probs, 2), labels, n_resamples=100, method="basic", seed=1
    )
    assert pa == pb


def test_paired_identical_inputs_give_exact_zero():
    probs, labels = random_probs(400, 5, 3)
    for name in ("ece", "cwece", "nll"):
        res = paired_bootstrap(
            name, probs, probs.copy(), labels, n_resamples=100, method="percentile"
        )
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
    res = paired_bootstrap("ece", probs, over, labels, n_resamples=300, method="basic", seed=0)
    assert res.difference == pytest.approx(M.ece(probs, labels) - M.ece(over, labels))
    assert res.difference < 0 and res.high < 0  # CI excludes 0
    assert res.p_value == pytest.approx(2 / 301)  # the smallest p-value 300 resamples give
    rev = paired_bootstrap("ece", over, probs, labels, n_resamples=300, method="basic", seed=0)
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


def test_basic_interval_definition():
    # bounds 2 t - q_hi, 2 t - q_lo of the same resampled values the percentile interval uses
    probs, labels = calibrated(300, 4, 11)
    pct = bootstrap_ci("cwece", probs, labels, n_resamples=100, seed=4, method="percentile")
    bas = bootstrap_ci("cwece", probs, labels, n_resamples=100, seed=4, method="basic")
    assert bas.method == "basic" and pct.method == "percentile"
    t = M.classwise_ece(probs, labels)
    assert bas.estimate == pytest.approx(t) == pct.estimate
    assert bas.low == pytest.approx(max(0.0, 2 * t - pct.high))
    assert bas.high == pytest.approx(2 * t - pct.low)
    # the plug-in cwECE of a calibrated model is biased up: the percentile interval sits above it
    assert pct.low > t and not pct.contains_estimate
    assert bas.low <= bas.center <= bas.high
    assert bootstrap_ci("nll", probs, labels, n_resamples=20).method == "percentile"
    with pytest.raises(ValueError, match="method"):
        bootstrap_ci("ece", probs, labels, method="bca")


def test_population_errors_match_large_sample():
    # the integrated population errors equal the plug-in errors of a very large sample
    model = SyntheticModel(n_classes=5, a=4.0, b=2.0, gamma=1.5)
    truth = population_errors(model)
    p, y = model.sample(400_000, np.random.default_rng(0))
    assert M.ece(p, y) == pytest.approx(truth["ece"], abs=1.5e-3)
    assert M.classwise_ece(p, y) == pytest.approx(truth["cwece"], abs=1e-3)
    calibrated = population_errors(SyntheticModel(gamma=1.0))
    assert calibrated["ece"] == pytest.approx(0.0, abs=1e-12)


def test_coverage_of_calibration_error_intervals():
    # 60 test sets of 2000 samples from a model with known classwise ECE: the basic interval
    # covers the population value near the nominal 95%; the percentile interval, centred on
    # the upward-biased resamples, mostly misses it (the defect the basic interval fixes).
    model = SyntheticModel()
    truth = population_errors(model)["cwece"]
    rng = np.random.default_rng(2024)
    reps = 60
    hits = {"basic": 0, "percentile": 0}
    for r in range(reps):
        p, y = model.sample(2000, rng)
        for method in hits:
            ci = bootstrap_ci("cwece", p, y, n_resamples=150, seed=r, method=method)
            hits[method] += ci.low <= truth <= ci.high
    # binomial sd of a 95% coverage over 60 sets is ~.028
    assert hits["basic"] / reps >= 0.85
    assert hits["percentile"] / reps <= 0.6


def test_population_scores_match_large_sample():
    # the integrated accuracy, NLL and Brier score of the model and of a temperature-scaled copy
    # with swapped predictions equal the means of 400,000 samples within 4 standard errors, and
    # the variant's integrated ECE its plug-in value
    model = SyntheticModel(n_classes=7, a=4.0, b=2.0, gamma=1.4)
    rng = np.random.default_rng(5)
    p, y = model.sample(400_000, rng)
    q = variant(p, temperature=1.3, swap=0.1, rng=rng)
    for probs, kw in ((p, {}), (q, {"temperature": 1.3, "swap": 0.1})):
        truth = population_scores(model, **kw)
        for name in ("accuracy", "nll", "nll_modern", "nll_kull", "brier", "brier_kull"):
            (x,) = METRICS[name].stats(probs, y, None)
            se = x.std() / np.sqrt(x.size)
            assert abs(x.mean() - truth[name]) < 4 * se, (name, kw)
        # the integration error is far below any Monte-Carlo or coverage resolution
        coarse = population_scores(model, points=100_000, **kw)
        assert max(abs(coarse[k] - truth[k]) for k in truth) < 1e-8
    assert M.ece(q, y) == pytest.approx(population_errors(model, 15, 400_000, 1.3, 0.1)["ece"],
                                        abs=1.5e-3)  # fmt: skip
    # temperature scaling keeps every prediction; a swap moves the top class elsewhere
    assert np.array_equal(np.argmax(variant(p[:1000], 1.7), axis=1), np.argmax(p[:1000], axis=1))
    assert population_scores(model, temperature=1.7)["accuracy"] == pytest.approx(
        population_scores(model)["accuracy"]
    )
    with pytest.raises(ValueError, match="rng"):
        variant(p, swap=0.1)


def test_population_reliability_matches_large_sample():
    # the smoothed population curve equals the smoothed curve of 400,000 samples at the same
    # bandwidth within 4 standard errors wherever many samples lie; unsmoothed: t ** gamma
    from calbench.metrics.smooth import smooth_reliability

    model = SyntheticModel(n_classes=10, gamma=1.6)
    conf, correct = M.top_label(*model.sample(400_000, np.random.default_rng(8)))
    curve = smooth_reliability(conf, correct, sigma=0.04, n_bootstrap=0)
    pop = population_reliability(model, curve.t, sigma=0.04)
    dense = curve.n_local > 5000
    se = np.sqrt(curve.mean * (1 - curve.mean) / curve.n_local)
    assert dense.sum() > 50
    assert np.all(np.abs(pop - curve.mean)[dense] < 4 * se[dense])
    np.testing.assert_allclose(population_reliability(model, [0.05, 0.5, 1.0]),
                               [np.nan, 0.5**1.6, 1.0])  # fmt: skip


def test_coverage_of_the_intervals_the_report_shows():
    # A small version of perf/bench_coverage.py's part "shown": the intervals the report prints,
    # built by the product's own functions with the study's settings (200 resamples, level 0.95,
    # seed 0 for every interval), contain the population value in about 95% of 120 simulated
    # test sets of an over-confident 10-class model: the metric tables' percentile intervals of
    # accuracy, NLL and Brier score (evaluate_rows) and the paired comparison's interval of the
    # NLL difference of the model temperature-scaled at T = 1.2 against the model itself
    # (compare_rows). The paired percentile interval of an ECE difference, which the
    # dataset-shift section no longer shows, misses the true difference most of the time here.
    from calbench.stats.comparisons import compare_rows
    from calbench.steps import evaluate_rows

    model = SyntheticModel(n_classes=10, gamma=1.6)
    truth = population_scores(model)
    d_nll = population_scores(model, temperature=1.2)["nll"] - truth["nll"]
    d_ece = population_errors(model, temperature=1.2)["ece"] - population_errors(model)["ece"]
    names = ("accuracy", "nll", "brier")
    rng = np.random.default_rng(11)
    reps, n = 120, 400
    hits = dict.fromkeys([*names, "d_nll", "d_ece"], 0)
    for _ in range(reps):
        p, y = model.sample(n, rng)
        halves = {"test": (None, y), "meta": {"dataset": "d", "model": "m"}}
        rows = evaluate_rows(halves, {"test": p}, "m", {k: METRICS[k] for k in names},
                             half_names=["test"], n_bootstrap=200, level=0.95, seed=0)  # fmt: skip
        for r in rows:
            hits[r["metric"]] += r["ci_low"] <= truth[r["metric"]] <= r["ci_high"]
        rows = compare_rows(halves, {"ts": variant(p, 1.2), "m": p}, {"nll": METRICS["nll"]},
                            ["m"], n_bootstrap=200, level=0.95, seed=0)  # fmt: skip
        r = next(r for r in rows if r["method"] == "ts" and r["baseline"] == "m")
        hits["d_nll"] += r["ci_low"] <= d_nll <= r["ci_high"]
        ci = paired_bootstrap("ece", variant(p, 1.2), p, y, 200, 0.95, 0, method="percentile")
        hits["d_ece"] += ci.low <= d_ece <= ci.high
    # binomial sd of a 95% coverage over 120 sets is ~.02
    for key in (*names, "d_nll"):
        assert 0.88 <= hits[key] / reps <= 0.995, (key, hits[key])
    assert hits["d_ece"] / reps <= 0.75


def test_reliability_band_covers_the_smoothed_curve():
    # The reliability diagrams' pointwise band (the diagrams' level, resamples and seed)
    # contains the smoothed population curve at the sample's bandwidth at about 95% of the drawn
    # points over 40 test sets of a nearly calibrated model (perf/bench_coverage.py, part
    # "bands"); the former 90% band of 100 resamples covers 86% of them here.
    from calbench.metrics.smooth import smooth_reliability
    from calbench.plots._base import FEW_SAMPLES
    from calbench.plots.reliability import SMOOTH_BOOTSTRAP, SMOOTH_LEVEL, SMOOTH_POINTS

    model = SyntheticModel(n_classes=10, gamma=1.1)
    rng = np.random.default_rng(21)
    drawn = covered = 0
    for _ in range(40):
        conf, correct = M.top_label(*model.sample(600, rng))
        curve = smooth_reliability(conf, correct, n_points=SMOOTH_POINTS,
                                   n_bootstrap=SMOOTH_BOOTSTRAP, level=SMOOTH_LEVEL, seed=0)  # fmt: skip
        lo, hi = curve.lower, curve.upper
        shown = (curve.n_local >= FEW_SAMPLES) & np.isfinite(lo) & np.isfinite(hi)
        target = population_reliability(model, curve.t, curve.sigma)
        drawn += shown.sum()
        covered += np.sum(shown & (lo <= target) & (target <= hi))
    assert 0.90 <= covered / drawn <= 0.99


def test_holm_known_answer():
    adj = S.holm([0.01, 0.04, 0.03, np.nan, 0.5])
    # sorted .01 .03 .04 .5 (m = 4): 4 x .01, 3 x .03, max(.09, 2 x .04), max(.09, .5)
    np.testing.assert_allclose(adj, [0.04, 0.09, 0.09, np.nan, 0.5])
    assert S.holm([0.5, 0.6]).tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="p-values"):
        S.holm([1.5])


def test_mean_ranks_equal_scipy_rankdata():
    from scipy.stats import rankdata

    rng = np.random.default_rng(3)
    for shape in [(1,), (6,), (7, 17), (3, 4, 9), (5, 1), (0, 4)]:
        ties = rng.integers(0, 4, shape).astype(float)  # many ties
        distinct = rng.random(shape)
        for x in (ties, distinct, -ties):
            assert np.array_equal(S.mean_ranks(x), rankdata(x, axis=-1))
    x = rng.integers(0, 3, (6, 5)).astype(float)
    x[2, 3] = np.nan  # a row with a NaN ranks as NaN, as in scipy (nan_policy "propagate")
    got = S.mean_ranks(x)
    assert np.array_equal(got, rankdata(x, axis=-1), equal_nan=True)
    assert np.isnan(got[2]).all() and not np.isnan(got[[0, 1, 3, 4, 5]]).any()
    assert S.mean_ranks([3.0, 1.0, 3.0, 2.0]).tolist() == [3.5, 1.0, 3.5, 2.0]
    with pytest.raises(ValueError, match="at least one axis"):
        S.mean_ranks(1.0)


def test_paired_tests_and_ranks_leave_scipy_stats_unimported():
    """The calibrate job's tests and ranks use scipy.special (the same functions scipy.stats
    calls), so no job pays scipy.stats' start-up (about a CPU-second) for them."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from calbench import stats as S\n"
        "r = np.random.default_rng(0)\n"
        "a, b = r.random(500) < 0.7, r.random(500) < 0.6\n"
        "x, z = r.normal(size=200), r.normal(size=200)\n"
        "S.mcnemar_exact(a, b); S.paired_t(x, z); S.wilcoxon_signed_rank(x, z)\n"
        "S.friedman_test(r.random((8, 4))); S.average_ranks(r.random((8, 4)))\n"
        "S.nemenyi_cd(5, 8)\n"
        "print(sorted(m for m in sys.modules if m.startswith('scipy.stats')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_nemenyi_q_equals_scipy_studentized_range():
    import math

    from scipy.special import ndtri
    from scipy.stats import studentized_range

    for k in (2, 3, 4, 7, 10, 17, 50, 300):
        for alpha in (0.01, 0.05, 0.1):
            ref = studentized_range.ppf(1 - alpha, k, np.inf) / math.sqrt(2)
            assert S.nemenyi_q(k, alpha) == pytest.approx(ref, rel=1e-10)
    # two groups: the range of two standard normals over sqrt(2) is |N(0, 1)|
    assert S.nemenyi_q(2, 0.05) == pytest.approx(float(ndtri(0.975)), rel=1e-12)
    for bad in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match=">= 2 methods"):
            S.nemenyi_q(bad)
    with pytest.raises(ValueError, match="alpha"):
        S.nemenyi_q(4, 1.5)


def test_mcnemar_exact_p_is_the_exact_binomial_tail():
    from fractions import Fraction
    from math import comb

    from scipy.stats import binom

    for n, k in [(1, 0), (10, 2), (301, 120), (5000, 1666), (5000, 2500)]:
        exact = Fraction(2 * sum(comb(n, i) for i in range(k + 1)), 2**n)
        a = np.array([1] * (n - k) + [0] * k + [1] * 7, dtype=bool)
        b = np.array([0] * (n - k) + [1] * k + [1] * 7, dtype=bool)
        p = S.mcnemar_exact(a, b).p_value
        assert p == min(1.0, float(exact))  # correctly rounded
        assert p == pytest.approx(min(1.0, 2 * binom.cdf(k, n, 0.5)), rel=1e-11)


def test_friedman_matches_scipy_and_demsar():
    from scipy.stats import friedmanchisquare

    rng = np.random.default_rng(3)
    x = rng.random((14, 4)) + np.array([0.0, 0.3, 0.1, 0.2])
    res = S.friedman_test(x)
    ref = friedmanchisquare(*x.T)  # no ties: identical statistic
    assert res.chi2 == pytest.approx(ref.statistic) and res.p_chi2 == pytest.approx(ref.pvalue)
    assert res.f == pytest.approx((14 - 1) * res.chi2 / (14 * 3 - res.chi2))
    np.testing.assert_allclose(res.average_ranks, S.rank_rows(x).mean(axis=0))
    # Demsar 2006, table 5a and the CD of his C4.5 example (k = 4, N = 14): 1.25
    q = [S.nemenyi_q(k) for k in range(2, 11)]
    np.testing.assert_allclose(
        q, [1.960, 2.343, 2.569, 2.728, 2.850, 2.949, 3.031, 3.102, 3.164], atol=2e-3
    )
    assert S.nemenyi_cd(4, 14) == pytest.approx(1.25, abs=5e-3)
    # accuracy: higher is better, so the largest value gets rank 1; ties share ranks
    assert S.rank_rows([[0.9, 0.8, 0.9]], higher_is_better=True).tolist() == [[1.5, 3.0, 1.5]]
    with pytest.raises(ValueError, match="Friedman"):
        S.friedman_test([[1.0, 2.0]])


def test_calibration_errors_get_a_verified_interval_or_none():
    # the binned / absolute-gap errors of METRICS, the Kull et al. variants included
    from calbench.metrics import METRICS

    smooth = {"accuracy", "brier", "brier_kull", "nll", "nll_kull", "nll_modern"}
    higher = {
        "acc_at_90",
        "lac_coverage",
        "aps_coverage",
        "spiegelhalter_p",
        "ks_cal_p",
        "kuiper_cal_p",
    }
    assert set(METRICS) - S.CALIBRATION_ERRORS == smooth | higher
    assert S.NO_INTERVAL - S.CALIBRATION_ERRORS == higher
    # intervals only where perf/bench_coverage.py showed 90-99% coverage in every scenario:
    # no bootstrap construction did for ECE, classwise ECE or MCE; the others are unverified;
    # the unbiased squared errors get the jackknife interval of their unclipped U-statistic
    ub = {"ece_ub", "ece_ub_mass", "cwece_ub"}
    assert S.CALIBRATION_ERRORS - ub <= S.NO_INTERVAL
    assert {S.interval_method(METRICS[m]) for m in S.CALIBRATION_ERRORS - S.NO_INTERVAL} == {
        "jackknife"
    }


def test_metric_without_interval_refuses_a_default_one():
    probs, labels = random_probs(100, 3, 0)
    with pytest.raises(ValueError, match="has no interval: the largest bin gap"):
        bootstrap_ci("mce", probs, labels, n_resamples=10)
    assert bootstrap_ci("mce", probs, labels, n_resamples=10, method="basic").method == "basic"


# --- chunked (weighted) resampling equals the resample-by-resample loop -----------------------
BATCHED = ["ece", "mce", "cwece", "marginal_ce", "cwece_kull", "ece_kull", "mce_kull"]


def edge_probs(n, k, seed):
    """Random probabilities, half of the rows with their top entry exactly on a bin edge."""
    p, y = random_probs(n, k, seed)
    rng = np.random.default_rng(seed + 100)
    edges = np.concatenate([np.linspace(0, 1, 16), np.linspace(0, 1, 15)])
    edges = edges[edges >= 1.0 / k]
    for i in range(0, n, 2):
        e = edges[rng.integers(len(edges))]
        p[i] = (1.0 - e) / (k - 1)
        p[i, rng.integers(k)] = e
    return p, y


def loop_metric(name):
    """The registry metric as a plain callable: resampled row by row on probs[idx]."""
    metric = METRICS[name]
    return lambda p, y: metric(p, y)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", BATCHED)
def test_chunked_bootstrap_equals_the_loop(name, dtype, monkeypatch):
    probs, labels = edge_probs(150, 5, 11)
    probs = probs.astype(dtype)
    monkeypatch.setattr(S.common, "CHUNK_ENTRIES", 150 * 16)  # several chunks, the last one short
    method = S.interval_method(name) or "basic"
    fast = bootstrap_ci(name, probs, labels, n_resamples=70, seed=4, method=method)
    slow = bootstrap_ci(loop_metric(name), probs, labels, n_resamples=70, seed=4, method=method)
    assert fast.estimate == slow.estimate  # the plug-in value is computed as before
    np.testing.assert_allclose(
        [fast.low, fast.high, fast.center], [slow.low, slow.high, slow.center], rtol=1e-12
    )
    assert fast == bootstrap_ci(name, probs, labels, n_resamples=70, seed=4, method=method)


@pytest.mark.parametrize("name", BATCHED)
def test_chunked_paired_bootstrap_equals_the_loop(name, monkeypatch):
    probs, labels = edge_probs(160, 4, 12)
    other = sharpen(probs, 1.3)
    monkeypatch.setattr(S.common, "CHUNK_ENTRIES", 160 * 32)
    method = S.interval_method(name) or "basic"
    fast = paired_bootstrap(name, probs, other, labels, n_resamples=99, seed=6, method=method)
    slow = paired_bootstrap(
        loop_metric(name), probs, other, labels, n_resamples=99, seed=6, method=method
    )
    assert fast.difference == slow.difference
    np.testing.assert_allclose([fast.low, fast.high], [slow.low, slow.high], rtol=1e-12)
    assert fast.p_value == slow.p_value
    assert fast == paired_bootstrap(
        name, probs, other, labels, n_resamples=99, seed=6, method=method
    )


def test_chunked_resamples_equal_one_resample_at_a_time():
    # the values of every resample, not just the quantiles: record them through prepare_metric
    probs, labels = edge_probs(120, 6, 13)
    idx = np.concatenate(list(S.resample_indices(120, 50, 9)))
    for name in BATCHED:
        _, f = S.intervals.prepare_metric(METRICS[name], probs, labels)
        want = [METRICS[name](probs[row], labels[row]) for row in idx]
        np.testing.assert_allclose(f(idx), want, rtol=1e-12, atol=1e-15)


# --- paired tests -----------------------------------------------------------------------------
def test_mcnemar_exact_known_answer_and_scipy():
    from scipy.stats import binomtest

    # 8 samples a gets right and b wrong, 2 the reverse, 90 concordant
    a = np.array([1] * 8 + [0] * 2 + [1] * 50 + [0] * 40, dtype=bool)
    b = np.array([0] * 8 + [1] * 2 + [1] * 50 + [0] * 40, dtype=bool)
    res = S.mcnemar_exact(a, b)
    assert res.p_value == pytest.approx(2 * (1 + 10 + 45) / 1024)  # 2 P(X <= 2), n = 10
    assert res.p_value == pytest.approx(binomtest(8, 10, 0.5).pvalue)
    assert res.difference == pytest.approx(0.06) and res.statistic == 8
    assert res.min_p == pytest.approx(2 / 1024) and res.test == "mcnemar_exact"
    assert S.mcnemar_exact(a, a).p_value == 1.0


def test_paired_t_known_answer_and_scipy():
    from scipy.stats import t as t_dist
    from scipy.stats import ttest_rel

    res = S.paired_t([2.0, 4.0, 6.0], [1.0, 2.0, 3.0])  # d = 1, 2, 3: t = 2 / (1 / sqrt 3)
    assert res.statistic == pytest.approx(2 * np.sqrt(3))
    assert res.p_value == pytest.approx(2 * t_dist.sf(2 * np.sqrt(3), 2))
    rng = np.random.default_rng(0)
    x, z = rng.random(300), rng.random(300) + 0.05
    ref = ttest_rel(x, z)
    got = S.paired_t(x, z)
    assert got.statistic == pytest.approx(ref.statistic) and got.p_value == pytest.approx(
        ref.pvalue
    )
    assert S.paired_t(x, x).p_value == 1.0


def test_wilcoxon_known_answer_and_scipy():
    from scipy.stats import wilcoxon

    res = S.wilcoxon_signed_rank([1.0, 2, 3, 4, 5], [0.0] * 5)  # W+ = 15, mu 7.5, var 13.75
    assert res.statistic == 15
    z = 7.5 / np.sqrt(13.75)
    from scipy.stats import norm

    assert res.p_value == pytest.approx(2 * norm.sf(z))
    rng = np.random.default_rng(1)
    x = np.round(rng.normal(size=200), 1)  # ties and zeros
    z = np.round(rng.normal(size=200) + 0.2, 1)
    ref = wilcoxon(x, z, zero_method="wilcox", correction=False, method="approx")
    assert S.wilcoxon_signed_rank(x, z).p_value == pytest.approx(ref.pvalue, rel=1e-9)


def test_sign_flip_exact_on_a_tiny_sample():
    # enumerate all 2^N flips of accuracy for N = 10: the Monte Carlo p-value converges to it
    import itertools

    y = np.zeros(10, dtype=int)
    pa = np.tile([0.9, 0.1], (10, 1))  # always right
    pb = pa.copy()
    pb[:4] = [0.1, 0.9]  # wrong on 4 samples
    d = 1.0 - 0.6
    diffs = []
    for s in itertools.product([0, 1], repeat=10):
        s = np.array(s, bool)[:, None]
        diffs.append(M.accuracy(np.where(s, pb, pa), y) - M.accuracy(np.where(s, pa, pb), y))
    exact = np.mean(np.abs(diffs) >= d - 1e-12)  # = P(|2 Bin(4, 1/2) - 4| >= 4) = 1/8
    assert exact == pytest.approx(1 / 8)
    res = S.sign_flip_test("accuracy", pa, pb, y, n_permutations=20000, seed=1)
    assert res.p_value == pytest.approx(exact, abs=0.01)
    assert res.min_p == 1 / 20001 and res.n_permutations == 20000
    assert S.sign_flip_test("accuracy", pa, pa, y, n_permutations=50).p_value == 1.0


@pytest.mark.parametrize(
    "name", ["ece", "mce", "cwece", "marginal_ce", "ece_kull", "cwece_kull", "ace", "nll"]
)
def test_sign_flip_fast_paths_equal_the_generic_path(name):
    probs, labels = edge_probs(120, 4, 21)
    other = sharpen(probs, 1.4)
    fast = S.sign_flip_test(name, probs, other, labels, n_permutations=199, seed=2)
    metric = METRICS[name]
    slow = S.sign_flip_test(
        lambda p, y: metric(p, y), probs, other, labels, n_permutations=199, seed=2
    )
    assert fast.difference == pytest.approx(slow.difference, abs=1e-12)
    assert fast.p_value == slow.p_value


def test_permutations_for_family_size():
    assert S.permutations_for(8, 0.05) == 639  # ceil(4 * 8 / 0.05) - 1
    assert S.permutations_for(9, 0.05) == 719
    assert S.permutations_for(1, 0.05) == 79
    assert S.permutations_for(8, 0.05, factor=10) == 1599
    assert S.min_adjusted_p(1 / 1600, 8) == pytest.approx(0.005)
    with pytest.raises(ValueError, match="family_size"):
        S.permutations_for(0)


def test_paired_test_dispatches_on_the_registry():
    probs, labels = random_probs(200, 3, 4)
    other = sharpen(probs, 1.5)
    assert S.paired_test("accuracy", probs, other, labels).test == "mcnemar_exact"
    assert S.paired_test("nll", probs, other, labels).test == "paired_t"
    assert S.paired_test("brier", probs, other, labels, test="wilcoxon").test == "wilcoxon"
    assert S.paired_test("ece", probs, other, labels, n_permutations=99).test == "sign_flip"
    with pytest.raises(ValueError, match="sign_flip"):
        S.paired_test("ece", probs, other, labels, test="paired_t")


def test_calibrated_versus_overconfident_is_significant_after_holm():
    # ECE ~0.01 versus ~0.15 on the same 5,000 labels: the sign-flip test with B chosen for a
    # family of 9 comparisons reaches an adjusted p far below 0.05 (the old bootstrap + Holm
    # over the whole report could not go below ~0.2)
    p, y = calibrated(5000, 10, 3)
    over = sharpen(p, 2.5)
    assert M.ece(p, y) < 0.03 and M.ece(over, y) > 0.1
    b = S.permutations_for(9, 0.05)
    res = S.paired_test("ece", p, over, y, n_permutations=b)
    adjusted = S.holm([res.p_value] + [1.0] * 8)[0]
    assert adjusted == pytest.approx(9 / (b + 1)) and adjusted <= 0.05 / 4  # factor 4 below alpha


def test_interval_constructions_known_answer():
    values = np.linspace(0.0, 1.0, 101)  # quantiles 0.025, 0.05, 0.975 exactly
    pct = S.interval_from_values(0.6, values, 0.95, "percentile")
    assert (pct.low, pct.high) == pytest.approx((0.025, 0.975))
    basic = S.interval_from_values(0.6, values, 0.95, "basic")
    assert (basic.low, basic.high, basic.center) == pytest.approx((0.225, 1.175, 0.7))
    upper = S.interval_from_values(0.6, values, 0.95, "upper")
    assert (upper.low, upper.high) == pytest.approx((0.0, 1.15))  # [0, 2 t - q_0.05]
    clipped = S.interval_from_values(0.01, values, 0.95, "basic")
    assert (clipped.low, clipped.high) == (0.0, pytest.approx(0.0))
    with pytest.raises(ValueError, match="method must be one of"):
        S.interval_from_values(0.6, values, 0.95, "bca")
    # bootstrap_ci is bootstrap_values + interval_from_values
    p, y = random_probs(200, 3, 8)
    est, vals = S.bootstrap_values("ece", p, y, 50, seed=2)
    assert bootstrap_ci("ece", p, y, 50, seed=2, method="upper") == S.interval_from_values(
        est, vals, 0.95, "upper"
    )


def test_upper_bound_covers_a_zero_error_and_ece_has_no_default_interval():
    # the one-sided bound [0, 2t - q_0.05] always covers the 0 of a calibrated model; it is
    # not ECE's default: in perf/bench_coverage.py it covered 84-98% across scenarios, below
    # 90% for an over-confident 100-class model at N = 500 (as the basic interval did)
    model = SyntheticModel(gamma=1.0)
    assert population_errors(model)["ece"] < 1e-9
    rng = np.random.default_rng(7)
    for r in range(20):
        p, y = model.sample(1000, rng)
        ci = bootstrap_ci("ece", p, y, n_resamples=100, seed=r, method="upper")
        assert ci.low == 0.0 <= ci.high and ci.high >= 0.0
    assert S.interval_method("ece") is None
    assert "90-99%" in S.no_interval_reason("ece") and "bench_coverage" in S.no_interval_reason(
        "ece"
    )


def test_sign_flip_flips_are_shared_between_tests_and_equal_to_fresh_draws(monkeypatch):
    """The kept flips of a model's comparisons are the draws a fresh generator makes: cached,
    uncached (too many entries to keep) and a chunk drawn by hand give the same flips and
    p-values, and a new seed or sample count draws anew."""
    from calbench import stats
    from calbench.metrics import METRICS

    rng = np.random.default_rng(5)
    n, k = 400, 4
    y = rng.integers(0, k, n)
    pa = rng.dirichlet(np.ones(k), size=n)
    pb = 0.7 * pa + 0.3 / k
    stats.paired._FLIPS.clear()
    first = stats.sign_flip_test(METRICS["ece"], pa, pb, y, n_permutations=299, seed=4)
    kept = stats.paired._FLIPS[(4, n, 299)]
    assert sum(c.shape[0] for c in kept) == 299 and all(c.flags.f_contiguous for c in kept)
    by_hand = np.random.default_rng(4).random((kept[0].shape[0], n)) < 0.5
    assert np.array_equal(kept[0], by_hand)
    again = stats.sign_flip_test(METRICS["cwece"], pa, pb, y, n_permutations=299, seed=4)
    assert stats.paired._FLIPS[(4, n, 299)] is kept  # reused, not drawn again
    monkeypatch.setattr(stats.paired, "_FLIP_CACHE_ENTRIES", 0)
    stats.paired._FLIPS.clear()
    assert stats.sign_flip_test(METRICS["ece"], pa, pb, y, n_permutations=299, seed=4) == first
    assert stats.sign_flip_test(METRICS["cwece"], pa, pb, y, n_permutations=299, seed=4) == again
    assert not stats.paired._FLIPS


def _calibrated_coarsening(model, probs, levels=4):
    """A calibrated model's (gamma 1) calibrated coarsening: each top confidence replaced by
    its population quantile group's mean confidence (exact Beta moments), which is also the
    group's accuracy (perf/bench_tests.py::coarsen)."""
    from scipy.special import betainc
    from scipy.stats import beta

    k, a, b = model.n_classes, model.a, model.b
    qs = beta.ppf(np.linspace(0.0, 1.0, levels + 1), a, b)
    top = np.argmax(probs, axis=1)
    u = (probs[np.arange(top.shape[0]), top] - 1.0 / k) / (1.0 - 1.0 / k)
    g = np.clip(np.searchsorted(qs, u, side="right") - 1, 0, levels - 1)
    lo, hi = qs[g], qs[g + 1]
    mean_u = a / (a + b) * (betainc(a + 1, b, hi) - betainc(a + 1, b, lo))
    mean_u /= betainc(a, b, hi) - betainc(a, b, lo)
    c = 1.0 / k + (1.0 - 1.0 / k) * mean_u
    out = np.repeat(((1.0 - c) / (k - 1))[:, None], k, axis=1)
    out[np.arange(top.shape[0]), top] = c
    return out


@pytest.mark.parametrize("gamma", [1.0, 1.6])
def test_unbiased_error_interval_covers_its_population_value(gamma):
    """A small version of perf/bench_coverage.py part ub: 300 test sets of N = 500, 95%
    interval of ece_ub (population value with the same bins): coverage in [0.90, 0.99]
    (binomial standard error 0.013)."""
    model = SyntheticModel(n_classes=10, gamma=gamma)
    truth = population_errors(model)["ece_ub"]
    rng = np.random.default_rng(11)
    cover = 0
    for _ in range(300):
        p, y = model.sample(500, rng)
        _, lo, hi = S.ub_interval("ece_ub", p, y)
        cover += lo <= truth <= hi
    assert 0.90 <= cover / 300 <= 0.99


def test_unbiased_error_test_keeps_its_level_against_a_calibrated_coarsening():
    """The same-sample null the plug-in sign-flip test fails (perf/bench_tests.py): a
    calibrated model against its calibrated 4-level coarsening, N = 1000, 300 test sets:
    rejections at 0.05 stay below 0.05 + 2 standard errors; the plug-in ECE's sign-flip test
    rejects far more often on the same sets."""
    model = SyntheticModel(n_classes=10, gamma=1.0)
    assert population_errors(model)["ece_ub"] < 1e-9
    rng = np.random.default_rng(12)
    hits = flips = 0
    for r in range(300):
        p, y = model.sample(1000, rng)
        q = _calibrated_coarsening(model, p)
        hits += S.paired_test("ece_ub", p, q, y).p_value < 0.05
        if r < 60:
            flips += S.paired_test("ece", p, q, y, n_permutations=99, seed=r).p_value < 0.05
    assert hits / 300 <= 0.05 + 2 * (0.05 * 0.95 / 300) ** 0.5
    assert flips / 60 > 0.1


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_bootstrap_cis_equal_bootstrap_ci_of_each_metric(dtype):
    p, y = random_probs(400, 4, seed=11)
    p = p.astype(dtype)
    names = ["accuracy", "nll", "brier", "ece_ub", "cwece_ub", "nll_modern"]
    got = S.bootstrap_cis({n: METRICS[n] for n in names}, p, y, n_resamples=60, seed=4)
    assert list(got) == names
    for n in names:
        assert got[n] == bootstrap_ci(METRICS[n], p, y, n_resamples=60, seed=4), n
    assert S.bootstrap_cis({}, p, y) == {}
    with pytest.raises(ValueError, match="has no interval"):
        S.bootstrap_cis({"ece": METRICS["ece"]}, p, y)


def test_wiggle_model_population_scores_match_large_sample():
    # the one-parameter family cannot straighten its accuracy curve: the integrated Brier score
    # and NLL (model and a temperature-scaled variant) equal a large sample's means
    from calbench.synthetic import WiggleModel, population_scores, variant

    model = WiggleModel(n_classes=4, wiggle=0.5)
    p, y = model.sample(200_000, np.random.default_rng(3))
    c = p.max(axis=1)
    assert np.mean(c[c < 0.5] < 0.4) > 0  # sanity: both confidence regions are sampled
    assert model.accuracy_at(np.array([0.4, 0.9])).tolist() != [0.4, 0.9]
    for t in (1.0, 1.3):
        q = variant(p, temperature=t)
        truth = population_scores(model, temperature=t)
        brier = np.mean(np.sum((q - np.eye(4)[y]) ** 2, axis=1))
        assert brier == pytest.approx(truth["brier"], abs=3e-3)
        assert -np.mean(np.log(q[np.arange(len(y)), y])) == pytest.approx(truth["nll"], abs=6e-3)
    assert WiggleModel().accuracy_at(np.array([0.3, 0.8])) == pytest.approx([0.3, 0.8])
    with pytest.raises(ValueError, match="wiggle must lie in"):
        WiggleModel(wiggle=2.0)
