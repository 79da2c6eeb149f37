"""Bootstrap confidence intervals, paired comparisons and rank statistics across models.

Intervals over samples (Efron & Tibshirani 1993; Davison & Hinkley 1997, ch. 5): each resample
draws N sample indices with replacement and re-evaluates the metric. Two interval constructions:

* **percentile** (Davison & Hinkley 1997, eq. 5.18): the ``(1 - level)/2`` and ``(1 + level)/2``
  quantiles of the resampled values. Used for accuracy, NLL, Brier score and other means, whose
  plug-in estimates are (nearly) unbiased.
* **basic** (Davison & Hinkley 1997, eq. 5.6): ``[2 t - q_hi, 2 t - q_lo]`` with ``t`` the
  estimate and ``q`` the same quantiles, clipped at 0. Used for calibration errors (ECE, MCE,
  classwise ECE and the other binned or absolute-gap errors of :data:`CALIBRATION_ERRORS`):
  their plug-in estimates are biased upward (a bin's ``|acc - conf|`` is positive even for a
  calibrated model), and a resample is biased upward again by about the same amount, so the
  percentile interval sits *above* the estimate and misses the population value. The basic
  bootstrap subtracts that second bias; it is the interval Kumar, Liang & Ma (2019, "Verified
  uncertainty calibration", §5 and their released library) report for calibration errors. Its
  centre ``2 t - median(t*)`` is the bootstrap bias-corrected estimate (:attr:`BootstrapCI.center`).
  The interval targets the *population* binned calibration error (same bins), not the biased
  plug-in value, so a plug-in estimate above its interval means "the bias is larger than the
  sampling noise". Coverage is checked by simulation on a model with a known calibration error
  (:mod:`calbench.stats` tests; figures in docs/statistics.md, ``perf/bench_coverage.py``).

A third construction, **upper** (:func:`interval_from_values`), is the one-sided basic bound
``[0, 2 t - q_{1 - level}]``, an upper confidence bound that includes 0. Which construction a
metric gets is a fact of its registry entry (``Metric.interval``, :func:`interval_method`); in
the simulation of docs/statistics.md no construction covered ECE, classwise ECE or MCE in
90-99% of test sets in every scenario, so those metrics get none (:data:`NO_INTERVAL`).

The paired bootstrap applies the same resampled indices to both sets of probabilities, so
shared sample difficulty cancels in the difference; its p-value inverts the interval it
reports, with the ``(1 + count) / (B + 1)`` correction (Davison & Hinkley 1997, eq. 4.11), so
it is never 0. Comparisons of calibrators use :func:`paired_test` instead: McNemar's exact test
(accuracy), the paired t-test or Wilcoxon's signed-rank test (means of per-sample values) and a
sign-flip test (any metric) whose number of flips :func:`permutations_for` chooses from the
family size. :func:`holm` adjusts many p-values (Holm 1979). :func:`average_ranks`, :func:`friedman_test` and
:func:`nemenyi_cd` compare calibrators over models (Demšar 2006, §3.2.2).

Resampled indices come from ``numpy.random.default_rng(seed)``, drawn in chunks of
``max(1, min(n_resamples, 2**21 // N))`` resamples; both functions draw the same indices for the
same ``(seed, N, n_resamples)``. Means of per-sample arrays (accuracy, NLL, Brier) are resampled
through those arrays, fully vectorised. Metrics with a ``weighted`` form (cwECE, the marginal
CE, and the top-label errors whose bins do not depend on the sample set: equal-width ECE and MCE,
Kull et al.'s ECE and MCE) are evaluated for a whole chunk at once from the per-sample
multiplicities ``bincount(idx)`` (:func:`multiplicities`): one matrix product for the column
totals and a few sparse products for the bin sums (:mod:`calbench.metrics.binning`); a paired
bootstrap shares a chunk's multiplicities between its two inputs. Other decomposed metrics
(equal-mass bins, KS, sbECE, ...) are re-evaluated on their per-sample arrays resample by
resample, and any other callable ``metric(probs, labels) -> float`` on ``probs[idx],
labels[idx]``. All routes give the same values up to rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from calbench._checks import check_labels, check_probs, check_probs_labels
from calbench.metrics import INTERVALS, METRICS, PAIRED_TESTS, Metric

_CHUNK_ENTRIES = 2**21

#: Interval constructions of :func:`bootstrap_ci` and :func:`paired_bootstrap`
#: (:data:`calbench.metrics.INTERVALS`).
INTERVAL_METHODS = INTERVALS

#: Metrics whose plug-in estimate is biased upward (an absolute or squared gap, binned or
#: cumulative): those whose registry interval is not the percentile one (``Metric.interval``).
CALIBRATION_ERRORS = frozenset(
    n for n, m in METRICS.items() if m.interval != "percentile" and not m.higher_is_better
)

#: Metrics reported without an interval (``Metric.interval is None``; the reason is
#: ``Metric.no_interval_reason``), e.g. the maximum bin gap (MCE), a non-smooth extreme whose
#: bootstrap is inconsistent.
NO_INTERVAL = frozenset(n for n, m in METRICS.items() if m.interval is None)


def _registry_entry(metric):
    if isinstance(metric, str):
        return METRICS.get(metric)
    return metric if isinstance(metric, Metric) else None


def interval_method(metric) -> str | None:
    """The interval construction of a metric name or :data:`calbench.metrics.METRICS` entry
    (``Metric.interval``): ``None`` when the metric has no interval; ``"percentile"`` for a
    plain callable or a metric that declares none."""
    m = _registry_entry(metric)
    if m is None:
        return "percentile"
    if m.interval is None or m.interval in INTERVALS:
        return m.interval
    return "percentile"


def no_interval_reason(metric) -> str:
    """Why ``metric`` gets no interval (empty when it has one)."""
    m = _registry_entry(metric)
    if m is None or m.interval is not None:
        return ""
    return m.no_interval_reason


@dataclass(frozen=True)
class BootstrapCI:
    """Bootstrap interval of one metric.

    ``method`` is ``"percentile"`` or ``"basic"``; ``center`` is the bias-corrected estimate
    ``2 estimate - median(resampled values)`` (basic) or the estimate itself (percentile).
    ``estimate`` is always the plug-in value ``metric(probs, labels)``.
    """

    estimate: float
    low: float
    high: float
    level: float
    n_resamples: int
    method: str = "percentile"
    center: float = float("nan")

    @property
    def contains_estimate(self) -> bool:
        return self.low <= self.estimate <= self.high


@dataclass(frozen=True)
class PairedBootstrap:
    """Paired bootstrap of ``metric(a) - metric(b)``.

    ``p_value`` is two-sided and inverts the reported interval: with ``d`` the observed difference
    and ``d*`` the resampled ones, the percentile interval gives
    ``2 min(1 + #{d* <= 0}, 1 + #{d* >= 0}) / (B + 1)``, the basic interval the same with
    ``d* - d`` compared with ``d`` (the bootstrap null distribution of Hall & Wilson 1991),
    capped at 1. The ``+1`` (Davison & Hinkley 1997, eq. 4.11) keeps it above 0: its smallest
    value is ``2 / (B + 1)``. Identical inputs give 1.
    """

    difference: float
    low: float
    high: float
    p_value: float
    level: float
    n_resamples: int
    method: str = "percentile"


def _resolve(metric) -> Callable:
    if isinstance(metric, str):
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; choose from {sorted(METRICS)}")
        return METRICS[metric]
    if not callable(metric):
        raise ValueError(
            f"metric must be a callable f(probs, labels) -> float or a METRICS name, got {metric!r}"
        )
    return metric


def _check_options(n_resamples, level, seed) -> tuple[int, float, int]:
    if (
        isinstance(n_resamples, bool)
        or not isinstance(n_resamples, int | np.integer)
        or n_resamples < 1
    ):
        raise ValueError(f"n_resamples must be an integer >= 1, got {n_resamples!r}")
    if isinstance(level, bool) or not isinstance(level, int | float | np.floating):
        raise ValueError(f"level must be a number in (0, 1), e.g. 0.95, got {level!r}")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must lie in (0, 1), e.g. 0.95, got {level!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(n_resamples), float(level), int(seed)


def resample_indices(n: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Yield ``(chunk, n)`` arrays of bootstrap indices, ``n_resamples`` rows in all."""
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_resamples, _CHUNK_ENTRIES // max(n, 1)))
    for start in range(0, n_resamples, chunk):
        yield rng.integers(0, n, size=(min(chunk, n_resamples - start), n))


def multiplicities(idx: np.ndarray, n: int) -> np.ndarray:
    """Per-sample multiplicities of a chunk of resamples: ``(r, n)`` indices in ``[0, n)`` give
    the float64 ``(r, n)`` array whose row ``i`` is ``np.bincount(idx[i], minlength=n)``."""
    r = idx.shape[0]
    offset = (np.arange(r, dtype=np.int64) * n)[:, None]
    counts = np.bincount((idx + offset).ravel(), minlength=r * n)
    return counts.reshape(r, n).astype(np.float64)


def _prepare(metric, probs, labels, checked: tuple | None = None):
    """Return ``(estimate, f)`` where ``f(idx_chunk) -> values`` evaluates resamples.

    Metrics with a ``weighted`` form evaluate a whole chunk from its multiplicities in one call
    (their estimate still comes from ``stats``/``reduce`` when they have one, else from the
    unweighted call); plain means index their per-sample array; other decomposed metrics and
    plain callables are re-evaluated resample by resample. ``checked``: ``(p, y)`` already
    validated from ``probs, labels`` by the caller.
    """
    dtype = getattr(probs, "dtype", None)
    stats = getattr(metric, "stats", None)
    reduce = getattr(metric, "reduce", None)
    p, y = check_probs_labels(probs, labels) if checked is None else checked
    n = p.shape[0]
    weighted = getattr(metric, "weighted", None)
    if stats is not None and reduce is not None:
        arrays = stats(p, y, dtype)
        estimate = float(reduce(*arrays))
        if getattr(metric, "is_mean", False):
            (x,) = arrays

            def f(idx):
                return x[idx].mean(axis=1)
        elif weighted is not None:
            f = _batched(weighted(p, y, dtype), n)
        else:

            def f(idx):
                return np.array([reduce(*(a[row] for a in arrays)) for row in idx])

        return estimate, f
    if weighted is not None:
        g = weighted(p, y, dtype)
        return float(g(None)), _batched(g, n)
    estimate = float(metric(p, y))

    def f(idx):
        return np.array([float(metric(p[row], y[row])) for row in idx])

    return estimate, f


def _batched(g, n: int):
    """``f(idx_chunk, weights=None)`` of a ``weighted`` form: one call on the chunk's
    multiplicities (``weights``, when the caller already has them)."""

    def f(idx, weights=None):
        w = multiplicities(idx, n) if weights is None else weights
        return np.asarray(g(w), dtype=np.float64).reshape(idx.shape[0])

    f.uses_weights = True
    return f


def _interval(values: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(values, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(lo), float(hi)


def _check_method(method, metric) -> str:
    if method is None:
        method = interval_method(metric)
        if method is None:
            raise ValueError(
                f"metric {getattr(metric, 'name', metric)!r} has no interval: "
                f"{no_interval_reason(metric)}; pass method='basic' to compute one anyway"
            )
        return method
    if method not in INTERVAL_METHODS:
        raise ValueError(f"method must be one of {list(INTERVAL_METHODS)} or None, got {method!r}")
    return method


def bootstrap_ci(
    metric,
    probs,
    labels,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    method: str | None = None,
) -> BootstrapCI:
    """Bootstrap confidence interval of ``metric(probs, labels)`` over samples.

    ``metric`` is a callable ``f(probs, labels) -> float`` or a name in
    :data:`calbench.metrics.METRICS`. ``method``: ``"percentile"``, ``"basic"`` (bounds
    ``2 t - q`` clipped at 0; Kumar et al. 2019), ``"upper"`` (``[0, 2 t - q_{1 - level}]``)
    or ``None`` (:func:`interval_method`, the registry's ``Metric.interval``; a metric without
    an interval raises). Deterministic for a given ``seed``
    (:func:`interval_from_values`).
    """
    n_resamples, level, seed = _check_options(n_resamples, level, seed)
    if method is not None:
        method = _check_method(method, metric)
    else:
        check_probs_labels(probs, labels)  # bad input is reported before a missing interval
        method = _check_method(method, metric)
    if method == "jackknife":
        est, lo, hi = ub_interval(metric, probs, labels, level)
        return BootstrapCI(est, lo, hi, level, 0, "jackknife", est)
    estimate, values = bootstrap_values(metric, probs, labels, n_resamples, seed)
    return interval_from_values(estimate, values, level, method)


def bootstrap_values(
    metric, probs, labels, n_resamples: int = 1000, seed: int = 0
) -> tuple[float, np.ndarray]:
    """``(estimate, values)``: the plug-in value and the ``n_resamples`` resampled values of
    :func:`bootstrap_ci` (same indices for the same seed), to build several intervals from one
    set of resamples (:func:`interval_from_values`)."""
    metric = _resolve(metric)
    n_resamples, _, seed = _check_options(n_resamples, 0.95, seed)
    estimate, f = _prepare(metric, probs, labels)
    n = np.shape(labels)[0]
    values = np.concatenate([f(idx) for idx in resample_indices(n, n_resamples, seed)])
    return estimate, values


def interval_from_values(estimate: float, values, level: float, method: str) -> BootstrapCI:
    """The ``method`` interval (:data:`INTERVAL_METHODS`) from resampled ``values``:

    * ``percentile``: ``[q_lo, q_hi]``, the ``(1 -+ level)/2`` quantiles (Davison & Hinkley
      1997, eq. 5.18);
    * ``basic``: ``[2 t - q_hi, 2 t - q_lo]`` clipped at 0 (eq. 5.6);
    * ``upper``: the one-sided basic bound ``[0, 2 t - q_{1 - level}]`` (eq. 5.6 with one tail):
      an upper confidence bound at ``level`` that always includes 0, for errors that may be 0.
    """
    values = np.asarray(values, dtype=np.float64)
    if method == "jackknife":
        raise ValueError(
            "the jackknife interval is not built from bootstrap values; use ub_interval"
        )
    if method not in INTERVAL_METHODS:
        raise ValueError(f"method must be one of {list(INTERVAL_METHODS)}, got {method!r}")
    n_resamples = int(values.shape[0])
    low, high = _interval(values, level)
    if method == "basic":
        low, high = max(0.0, 2.0 * estimate - high), max(0.0, 2.0 * estimate - low)
        center = max(0.0, 2.0 * estimate - float(np.median(values)))
    elif method == "upper":
        q = float(np.quantile(values, 1.0 - level))
        low, high = 0.0, max(0.0, 2.0 * estimate - q)
        center = max(0.0, 2.0 * estimate - float(np.median(values)))
    else:
        center = estimate
    return BootstrapCI(estimate, low, high, level, n_resamples, method, center)


def paired_bootstrap(
    metric,
    probs_a,
    probs_b,
    labels,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    method: str | None = None,
) -> PairedBootstrap:
    """Paired bootstrap of ``metric(probs_a) - metric(probs_b)`` on the same labels.

    Every resample uses the same sample indices for both inputs. A negative difference of an
    error metric means ``a`` is better. ``method`` as in :func:`bootstrap_ci` (the basic
    interval of a difference is not clipped). See :class:`PairedBootstrap` for the p-value.
    """
    metric_arg = metric
    metric = _resolve(metric)
    n_resamples, level, seed = _check_options(n_resamples, level, seed)
    pa = check_probs(probs_a, "probs_a")
    pb = check_probs(probs_b, "probs_b")
    if pa.shape != pb.shape:
        raise ValueError(
            f"probs_a has shape {pa.shape} but probs_b has shape {pb.shape}; "
            "pass both calibrators' probabilities for the same samples and classes"
        )
    y = check_labels(labels, pa.shape[0], pa.shape[1])
    method = _check_method(method, metric_arg)
    est_a, fa = _prepare(metric, probs_a, labels, (pa, y))
    est_b, fb = _prepare(metric, probs_b, labels, (pb, y))
    shared = getattr(fa, "uses_weights", False) and getattr(fb, "uses_weights", False)
    diffs = []
    for idx in resample_indices(pa.shape[0], n_resamples, seed):
        if shared:  # both sides evaluate the chunk from the same multiplicities
            w = multiplicities(idx, pa.shape[0])
            diffs.append(fa(idx, w) - fb(idx, w))
        else:
            diffs.append(fa(idx) - fb(idx))
    diffs = np.concatenate(diffs)
    d = est_a - est_b
    low, high = _interval(diffs, level)
    if method in ("basic", "upper"):
        low, high = 2.0 * d - high, 2.0 * d - low
        null, ref = diffs - d, d  # H0 distribution centred at 0, compared with d
    else:
        null, ref = diffs, 0.0
    # the interval excludes 0 at level 1 - a exactly when the smaller tail share is < a / 2
    below, above = int(np.sum(null <= ref)), int(np.sum(null >= ref))
    p_value = float(min(1.0, 2.0 * (1 + min(below, above)) / (n_resamples + 1)))
    return PairedBootstrap(d, low, high, p_value, level, n_resamples, method)


# --------------------------------------------------------------------------------------------
# many comparisons and many models
# --------------------------------------------------------------------------------------------
def holm(p_values) -> np.ndarray:
    """Holm (1979) step-down adjusted p-values (family-wise error control, any dependence).

    With the ``m`` p-values sorted ascending, ``p_(i)`` becomes
    ``min(1, max_{j <= i} (m - j + 1) p_(j))``; NaNs stay NaN and do not count in ``m``.
    """
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if ok.size == 0:
        return out
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    m = ok.size
    order = ok[np.argsort(p[ok], kind="stable")]
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out[order] = adjusted
    return out


def mean_ranks(x) -> np.ndarray:
    """Ranks 1..n along the last axis, ties sharing their mean rank, a row with a NaN all NaN:
    ``scipy.stats.rankdata(x, axis=-1)`` (method "average"), here without importing
    ``scipy.stats``, which costs about a CPU-second of start-up in every job that tests or ranks.
    The mean of tied positions is a whole or half number, so the ranks are exact."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 0:
        raise ValueError("mean_ranks needs an array with at least one axis")
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    order = np.argsort(rows, axis=1, kind="stable")
    s = np.take_along_axis(rows, order, axis=1)
    new = np.ones(s.shape, dtype=bool)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    # one id per tie group, unique over all rows
    group = (np.cumsum(new, axis=1) - 1 + n * np.arange(rows.shape[0])[:, None]).ravel()
    positions = np.broadcast_to(np.arange(1, n + 1, dtype=np.float64), s.shape).ravel()
    mean = np.bincount(group, weights=positions) / np.maximum(np.bincount(group), 1)
    out = np.empty(rows.shape, dtype=np.float64)
    np.put_along_axis(out, order, mean[group].reshape(s.shape), axis=1)
    out[np.isnan(rows).any(axis=1)] = np.nan
    return out.reshape(x.shape)


def rank_rows(values, higher_is_better: bool = False) -> np.ndarray:
    """Rank every row of ``values`` (models x methods): 1 = best, ties share their mean rank."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"values must be a 2-D array (models x methods), got shape {x.shape}")
    return mean_ranks(-x if higher_is_better else x)


def average_ranks(values, higher_is_better: bool = False) -> np.ndarray:
    """Mean rank of each column over the rows without NaN (Demšar 2006, §3.2.2)."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.all(np.isfinite(x), axis=1)]
    if x.shape[0] == 0:
        return np.full(np.shape(values)[1], np.nan)
    return rank_rows(x, higher_is_better).mean(axis=0)


@dataclass(frozen=True)
class Friedman:
    """Friedman test over ``n`` rows (models) and ``k`` columns (methods), Demšar 2006 eqs. 1-2.

    ``chi2`` (df ``k - 1``) and its p-value; ``f`` the Iman-Davenport statistic (df ``k - 1``,
    ``(k - 1)(n - 1)``) and its p-value, the less conservative version Demšar recommends.
    """

    n: int
    k: int
    average_ranks: tuple
    chi2: float
    p_chi2: float
    f: float
    p_f: float


def friedman_test(values, higher_is_better: bool = False) -> Friedman:
    """Friedman test of equal average ranks; rows with a NaN are dropped (needs n >= 2, k >= 2).

    ``chi2 = 12 n / (k (k + 1)) [sum_j R_j^2 - k (k + 1)^2 / 4]`` and
    ``F = (n - 1) chi2 / (n (k - 1) - chi2)`` (Demšar 2006, §3.2.2; ties get mean ranks, without
    the tie correction, as there). When every method ties in every row, ``chi2 = 0``, p = 1.
    """
    from scipy.special import chdtrc, fdtrc  # chi2.sf, f.sf of scipy.stats, bit for bit

    x = np.asarray(values, dtype=np.float64)
    x = x[np.all(np.isfinite(x), axis=1)]
    n, k = x.shape if x.ndim == 2 else (0, 0)
    if n < 2 or k < 2:
        raise ValueError(
            f"the Friedman test needs >= 2 complete rows and >= 2 methods, got {n} x {k}"
        )
    r = rank_rows(x, higher_is_better).mean(axis=0)
    chi2 = 12.0 * n / (k * (k + 1)) * (np.sum(r**2) - k * (k + 1) ** 2 / 4.0)
    chi2 = max(0.0, float(chi2))
    p_chi2 = float(chdtrc(k - 1, chi2))
    denom = n * (k - 1) - chi2
    if denom <= 0:  # every row ranks the methods identically
        f, p_f = math.inf, 0.0
    else:
        f = (n - 1) * chi2 / denom
        p_f = float(fdtrc(k - 1, (k - 1) * (n - 1), f))
    return Friedman(n, k, tuple(float(v) for v in r), chi2, p_chi2, float(f), p_f)


def nemenyi_q(k: int, alpha: float = 0.05) -> float:
    """Critical value ``q_alpha`` of the Nemenyi test: the studentized range quantile for ``k``
    groups and infinite df over sqrt(2) (Demšar 2006, table 5a: 1.960, 2.343, ... for k = 2, 3).

    With infinite df the studentized range is the range ``R`` of ``k`` standard normals, whose
    distribution function is ``P(R <= q) = k int phi(z) [Phi(z + q) - Phi(z)]^(k-1) dz`` (David
    & Nagaraja 2003, "Order Statistics", the range of a sample). The integral is a trapezoid sum
    on ``[-12, 12]`` (step 0.05; the integrand is smooth and negligible beyond, so the sum is
    accurate to ~1e-13), solved for ``1 - alpha`` by bracketed Newton steps: the same value as
    ``scipy.stats.studentized_range.ppf(1 - alpha, k, inf)`` to ~1e-12 relative, without the
    start-up of ``scipy.stats`` in the report job.
    """
    from scipy.special import ndtr, ndtri

    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 2:
        raise ValueError(f"the Nemenyi test needs >= 2 methods, got {k}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), e.g. 0.05, got {alpha!r}")

    def phi(t):  # the standard normal density
        return np.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)

    z = np.arange(-12.0, 12.0 + 0.025, 0.05)
    weight = 0.05 * phi(z)
    base = ndtr(z)
    lo, hi = 0.0, 40.0
    x = math.sqrt(2.0) * float(ndtri(1.0 - alpha / 2.0))  # exact for k = 2
    for _ in range(200):
        gap = ndtr(z + x) - base
        excess = k * float(weight @ gap ** (k - 1)) - (1.0 - alpha)
        if excess < 0:
            lo = x
        else:
            hi = x
        slope = k * (k - 1) * float(weight @ (phi(z + x) * gap ** (k - 2)))
        step = x - excess / slope if slope > 0 else 0.5 * (lo + hi)
        if not lo < step < hi:
            step = 0.5 * (lo + hi)
        if abs(step - x) <= 1e-15 * x:
            x = step
            break
        x = step
    return float(x / math.sqrt(2.0))


def nemenyi_cd(k: int, n: int, alpha: float = 0.05) -> float:
    """Critical difference ``q_alpha sqrt(k (k + 1) / (6 n))`` of average ranks (Demšar 2006,
    eq. after table 5): two methods differ significantly when their average ranks differ by more."""
    if n < 1:
        raise ValueError(f"the critical difference needs >= 1 row, got {n}")
    return nemenyi_q(k, alpha) * math.sqrt(k * (k + 1) / (6.0 * n))


# --------------------------------------------------------------------------------------------
# paired tests of two calibrators on the same test samples
# --------------------------------------------------------------------------------------------
#: Paired tests of :func:`paired_test` (:data:`calbench.metrics.PAIRED_TESTS`).
PAIRED_TEST_NAMES = PAIRED_TESTS


@dataclass(frozen=True)
class PairedTest:
    """A two-sided paired test of ``metric(a) - metric(b)`` on the same samples.

    ``test`` names the test (:data:`PAIRED_TEST_NAMES`), ``statistic`` its statistic (the
    number of discordant pairs won by ``a`` for McNemar, ``t``, the signed-rank ``W+``, or the
    observed difference for the sign-flip test); ``min_p`` is the smallest p-value the test
    could give on these samples (``2 / 2^n_discordant`` for McNemar's exact test,
    ``1 / (B + 1)`` for the sign-flip test with ``B`` flips, 0 for the asymptotic tests), so a
    caller can tell "not significant" from "cannot be significant". ``n_permutations`` is ``B``
    (0 for the other tests).
    """

    difference: float
    statistic: float
    p_value: float
    test: str
    min_p: float
    n_permutations: int = 0


def permutations_for(family_size: int, alpha: float = 0.05, factor: float = 4.0) -> int:
    """Sign-flips ``B`` that give a p-value resolution well below a Holm-corrected threshold.

    The sign-flip p-value is at least ``1 / (B + 1)``, so Holm over ``m`` tests can only reject
    when ``m / (B + 1) <= alpha``; ``B = ceil(factor m / alpha) - 1`` puts the smallest
    attainable adjusted p-value ``factor`` times below ``alpha`` (``m = 9``, ``alpha = 0.05``:
    ``B = 719``, smallest adjusted p 0.0125). A larger factor buys little power (the p-values
    that decide lie near ``alpha / m``, far above the resolution) at a proportional cost.
    """
    if isinstance(family_size, bool) or not isinstance(family_size, int | np.integer):
        raise ValueError(f"family_size must be an integer >= 1, got {family_size!r}")
    if family_size < 1:
        raise ValueError(f"family_size must be an integer >= 1, got {family_size!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), e.g. 0.05, got {alpha!r}")
    return max(1, math.ceil(factor * family_size / alpha) - 1)


def mcnemar_exact(correct_a, correct_b) -> PairedTest:
    """McNemar's (1947) exact test of equal accuracy on the same samples.

    With ``n01`` the samples ``a`` gets right and ``b`` wrong and ``n10`` the reverse, under
    H0 ``n01 ~ Binomial(n01 + n10, 1/2)``; the two-sided p-value is
    ``min(1, 2 P(X <= min(n01, n10)))`` (Dietterich 1998, sec. 3.5; Fagerland, Lydersen &
    Laake 2013, eq. 2). Concordant pairs carry no information; no discordant pair gives p = 1.
    """
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("correct_a and correct_b must be 1-D boolean arrays of the same length")
    n01 = int(np.sum(a & ~b))
    n10 = int(np.sum(~a & b))
    n = n01 + n10
    diff = (n01 - n10) / a.shape[0] if a.shape[0] else 0.0
    if n == 0:
        return PairedTest(diff, 0.0, 1.0, "mcnemar_exact", 1.0)
    p = min(1.0, _binomial_half_cdf_doubled(min(n01, n10), n))
    return PairedTest(diff, float(n01), p, "mcnemar_exact", min(1.0, 2.0 * 0.5**n))


def _binomial_half_cdf_doubled(k: int, n: int) -> float:
    """``2 P(X <= k)`` for ``X ~ Binomial(n, 1/2)``, exactly: ``2 sum_{i <= k} C(n, i) / 2^n``
    in integers, rounded once to a float."""
    term, total = 1, 1  # C(n, 0)
    for i in range(k):
        term = term * (n - i) // (i + 1)
        total += term
    return 2 * total / 2**n


def paired_t(x_a, x_b) -> PairedTest:
    """Paired t-test of equal means of per-sample values (e.g. NLL or Brier terms, Student
    1908): ``t = mean(d) / (sd(d) / sqrt(n))`` with ``d = x_a - x_b``, two-sided p from
    ``t_{n-1}``. Differences that are all equal give p = 1 (all 0) or 0 (a constant shift)."""
    from scipy.special import stdtr  # t.sf(x, df) of scipy.stats is stdtr(df, -x), bit for bit

    d = np.asarray(x_a, dtype=np.float64) - np.asarray(x_b, dtype=np.float64)
    n = d.shape[0]
    if n < 2:
        raise ValueError(f"the paired t-test needs >= 2 samples, got {n}")
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return PairedTest(
            mean,
            0.0 if mean == 0 else math.copysign(math.inf, mean),
            1.0 if mean == 0 else 0.0,
            "paired_t",
            0.0,
        )
    t = mean / (sd / math.sqrt(n))
    return PairedTest(mean, t, float(min(1.0, 2.0 * stdtr(n - 1, -abs(t)))), "paired_t", 0.0)


def wilcoxon_signed_rank(x_a, x_b) -> PairedTest:
    """Wilcoxon (1945) signed-rank test of per-sample differences ``d = x_a - x_b``, normal
    approximation with the tie correction (zero differences dropped, Wilcoxon's rule; ties
    share mean ranks; Hollander, Wolfe & Chicken 2014, sec. 3.1, eq. 3.12 without continuity
    correction). ``statistic`` is ``W+``, the rank sum of the positive differences;
    ``difference`` the mean of ``d``."""
    from scipy.special import ndtr  # norm.sf(z) of scipy.stats is ndtr(-z), bit for bit

    d = np.asarray(x_a, dtype=np.float64) - np.asarray(x_b, dtype=np.float64)
    mean = float(d.mean()) if d.size else 0.0
    nz = d[d != 0.0]
    n = nz.shape[0]
    if n == 0:
        return PairedTest(mean, 0.0, 1.0, "wilcoxon", 0.0)
    r = mean_ranks(np.abs(nz))
    w_plus = float(r[nz > 0].sum())
    mu = n * (n + 1) / 4.0
    _, counts = np.unique(r, return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24.0 - float(np.sum(counts**3 - counts)) / 48.0
    if var <= 0:
        return PairedTest(mean, w_plus, 1.0, "wilcoxon", 0.0)
    z = (w_plus - mu) / math.sqrt(var)
    return PairedTest(mean, w_plus, float(min(1.0, 2.0 * ndtr(-abs(z)))), "wilcoxon", 0.0)


def _flip_values(metric, pa, pb, y, dtype):
    """``(estimate_a, estimate_b, f)`` where ``f(s)`` gives ``metric`` of both mixtures for an
    ``(r, N)`` 0/1 array ``s`` of flips (1: the sample's outputs are swapped) as two ``(r,)``
    arrays: side A takes ``b``'s outputs where ``s`` is 1, side B ``a``'s."""
    stats = getattr(metric, "stats", None)
    reduce = getattr(metric, "reduce", None)
    linear = getattr(metric, "linear", None)
    if linear is not None:
        sums_a, from_sums = linear(pa, y, dtype)
        sums_b, _ = linear(pb, y, dtype)
        est_a = float(np.asarray(from_sums(*sums_a())).reshape(-1)[0])
        est_b = float(np.asarray(from_sums(*sums_b())).reshape(-1)[0])

        # side B's sums are the two full sums minus side A's (the weights add up to one)
        full = [u + v for u, v in zip(sums_a(), sums_b(), strict=True)]

        def f(s):
            keep, swap = sums_a(1.0 - s), sums_b(s)
            mixed_a = [u + v for u, v in zip(keep, swap, strict=True)]
            mixed_b = [t - u for t, u in zip(full, mixed_a, strict=True)]
            return np.asarray(from_sums(*mixed_a)), np.asarray(from_sums(*mixed_b))

        return est_a, est_b, f
    if stats is not None and reduce is not None:
        xa, xb = stats(pa, y, dtype), stats(pb, y, dtype)
        est_a, est_b = float(reduce(*xa)), float(reduce(*xb))

        def f(s):
            out_a, out_b = [], []
            for row in s.astype(bool):
                out_a.append(reduce(*(np.where(row, v, u) for u, v in zip(xa, xb, strict=True))))
                out_b.append(reduce(*(np.where(row, u, v) for u, v in zip(xa, xb, strict=True))))
            return np.asarray(out_a, dtype=np.float64), np.asarray(out_b, dtype=np.float64)

        return est_a, est_b, f
    est_a, est_b = float(metric(pa, y)), float(metric(pb, y))

    def f(s):
        out_a, out_b = [], []
        for row in s.astype(bool)[:, :, None]:
            out_a.append(float(metric(np.where(row, pb, pa), y)))
            out_b.append(float(metric(np.where(row, pa, pb), y)))
        return np.asarray(out_a), np.asarray(out_b)

    return est_a, est_b, f


#: the flips of the last sign-flip test, kept while they fit in this many entries (256 MiB of
#: float64): every comparison of a model uses the same seed, samples and number of flips
_FLIP_CACHE_ENTRIES = 2**25
_FLIPS: dict = {}


def _flip_chunks(seed: int, n: int, n_flips: int):
    """The ``(r, n)`` 0/1 float64 chunks of ``n_flips`` random flips of ``n`` samples from
    ``default_rng(seed)``, drawn as before (``rng.random((r, n)) < 0.5`` chunk by chunk) and
    stored column-major, which the sparse bin sums read without a transposed copy. The chunks
    of the last call are kept (up to :data:`_FLIP_CACHE_ENTRIES`): a model's comparisons share
    them instead of drawing the same flips again."""
    key = (seed, n, n_flips)
    if key in _FLIPS:
        return _FLIPS[key]
    chunk = max(1, min(n_flips, _CHUNK_ENTRIES // max(n, 1) // 4))

    def draw():
        rng = np.random.default_rng(seed)
        for start in range(0, n_flips, chunk):
            r = min(chunk, n_flips - start)
            yield np.asfortranarray(rng.random((r, n)) < 0.5, dtype=np.float64)

    if n * n_flips > _FLIP_CACHE_ENTRIES:
        return draw()
    chunks = list(draw())
    for c in chunks:
        c.setflags(write=False)
    _FLIPS.clear()
    _FLIPS[key] = chunks
    return chunks


def sign_flip_test(
    metric, probs_a, probs_b, labels, n_permutations: int = 1999, seed: int = 0
) -> PairedTest:
    """Paired sign-flip (randomization) test of ``metric(a) = metric(b)`` for any metric.

    H0: on every sample, the two calibrators' outputs are exchangeable. Each of ``B`` random
    flips swaps the outputs of a random half of the samples (each sample independently with
    probability 1/2) and recomputes ``d* = metric(mix_a) - metric(mix_b)``; the two-sided
    p-value is ``(1 + #{|d*| >= |d|}) / (B + 1)`` (Good 2005, ch. 3; Phipson & Smyth 2010,
    eq. 2: exact, never 0). Binned errors whose bins do not move under the swap mix the bin
    sums (``Metric.linear``), means mix per-sample arrays (``Metric.stats``), any other
    callable is re-evaluated on the mixed ``(N, K)`` arrays. Choose ``B`` with
    :func:`permutations_for` so the resolution suits the multiple-testing correction.
    """
    metric = _resolve(metric)
    if (
        isinstance(n_permutations, bool)
        or not isinstance(n_permutations, int | np.integer)
        or n_permutations < 1
    ):
        raise ValueError(f"n_permutations must be an integer >= 1, got {n_permutations!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    pa, pb, y = _paired_inputs(probs_a, probs_b, labels)
    dtype = getattr(probs_a, "dtype", None)
    est_a, est_b, f = _flip_values(metric, pa, pb, y, dtype)
    d = est_a - est_b
    exceed = 0
    tol = 1e-12 * max(1.0, abs(d))
    for s in _flip_chunks(int(seed), y.shape[0], int(n_permutations)):
        va, vb = f(s)
        exceed += int(np.sum(np.abs(va - vb) >= abs(d) - tol))
    p = (1 + exceed) / (int(n_permutations) + 1)
    return PairedTest(
        d, d, float(p), "sign_flip", 1.0 / (int(n_permutations) + 1), int(n_permutations)
    )


def _paired_inputs(probs_a, probs_b, labels):
    pa = check_probs(probs_a, "probs_a")
    pb = check_probs(probs_b, "probs_b")
    if pa.shape != pb.shape:
        raise ValueError(
            f"probs_a has shape {pa.shape} but probs_b has shape {pb.shape}; "
            "pass both calibrators' probabilities for the same samples and classes"
        )
    y = check_labels(labels, pa.shape[0], pa.shape[1])
    return pa, pb, y


def paired_test(
    metric,
    probs_a,
    probs_b,
    labels,
    *,
    test: str | None = None,
    n_permutations: int = 1999,
    seed: int = 0,
) -> PairedTest:
    """Two-sided paired test of ``metric(a) - metric(b)`` with the metric's own test.

    ``test`` (default: the registry's ``Metric.paired_test``; ``"sign_flip"`` for a plain
    callable): ``"mcnemar_exact"`` (accuracy), ``"paired_t"`` or ``"wilcoxon"`` (means of
    per-sample values: NLL, Brier score) or ``"sign_flip"`` (any metric; ``n_permutations``
    flips, ``seed``). The per-sample tests need a metric with one per-sample array
    (``Metric.is_mean``).
    """
    if test is None:
        entry = _registry_entry(metric)
        test = entry.paired_test if entry is not None and entry.paired_test else "sign_flip"
    if test not in PAIRED_TEST_NAMES:
        raise ValueError(f"test must be one of {list(PAIRED_TEST_NAMES)} or None, got {test!r}")
    if test == "sign_flip":
        return sign_flip_test(metric, probs_a, probs_b, labels, n_permutations, seed)
    if test == "jackknife_z":
        return ub_paired_test(metric, probs_a, probs_b, labels)
    m = _resolve(metric)
    if not getattr(m, "is_mean", False) or getattr(m, "stats", None) is None:
        raise ValueError(
            f"the {test} test needs a mean of one per-sample array (Metric.is_mean); "
            "use test='sign_flip' for this metric"
        )
    pa, pb, y = _paired_inputs(probs_a, probs_b, labels)
    dtype = getattr(probs_a, "dtype", None)
    (xa,), (xb,) = m.stats(pa, y, dtype), m.stats(pb, y, dtype)
    if test == "mcnemar_exact":
        if not (np.isin(xa, (0.0, 1.0)).all() and np.isin(xb, (0.0, 1.0)).all()):
            raise ValueError("McNemar's test needs a 0/1 per-sample score such as accuracy")
        return mcnemar_exact(xa > 0.5, xb > 0.5)
    if test == "paired_t":
        return paired_t(xa, xb)
    return wilcoxon_signed_rank(xa, xb)


def min_adjusted_p(min_p: float, family_size: int) -> float:
    """The smallest Holm-adjusted p-value a test with smallest p-value ``min_p`` can reach in a
    family of ``family_size`` tests: ``min(1, m min_p)`` (Holm 1979: the smallest p-value is
    multiplied by ``m``)."""
    return float(min(1.0, family_size * min_p))


# --------------------------------------------------------------------------------------------
# unbiased squared calibration errors: jackknife intervals and paired tests
# --------------------------------------------------------------------------------------------
def _jackknife_of(metric):
    m = _resolve(metric)
    jack = getattr(m, "jackknife", None)
    if jack is None:
        raise ValueError(
            f"metric {getattr(m, 'name', m)!r} has no jackknife form; "
            "use ece_ub, ece_ub_mass or cwece_ub"
        )
    return jack


def ub_jackknife(metric, probs, labels):
    """:class:`calbench.metrics.unbiased.UStat` of an unbiased squared calibration error
    (``Metric.jackknife``): the unclipped estimate ``t``, its ``N`` leave-one-out values ``loo``
    and the variance ``excess`` of the jackknife."""
    jack = _jackknife_of(metric)
    dtype = getattr(probs, "dtype", None)
    p, y = check_probs_labels(probs, labels)
    if p.shape[0] < 3:
        raise ValueError(f"the jackknife needs >= 3 samples, got {p.shape[0]}")
    return jack(p, y, dtype)


def _z(level: float, sided: str) -> float:
    from scipy.special import ndtri

    if isinstance(level, bool) or not isinstance(level, int | float | np.floating):
        raise ValueError(f"level must be a number in (0, 1), e.g. 0.95, got {level!r}")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must lie in (0, 1), e.g. 0.95, got {level!r}")
    return float(ndtri((1.0 + level) / 2.0)) if sided == "two" else float(ndtri(level))


def ub_interval(metric, probs, labels, level: float = 0.95) -> tuple[float, float, float]:
    """``(estimate, low, high)`` of an unbiased squared calibration error's root
    ``sqrt(theta)``: the score interval of the **unclipped** U-statistic ``T``
    (:func:`calbench.metrics.unbiased.score_bounds`: the ``theta >= 0`` a two-sided z-test at
    ``1 - level`` does not reject, its null variance the degenerate part plus a linear part
    proportional to ``theta`` from the exact jackknife, Efron & Stein 1981), square-rooted;
    ``estimate = sqrt(max(T, 0))``. The interval is for the population binned error with the
    same bins (Sun, Chaudhari, Barnett & Dobriban 2024 study such intervals); its coverage is
    checked by simulation in perf/bench_coverage.py (docs/statistics.md)."""
    from calbench.metrics.unbiased import root, score_bounds

    z = _z(level, "two")
    u = ub_jackknife(metric, probs, labels)
    lo, hi = score_bounds(u, z)
    return float(root(u.t)), float(root(lo)), float(root(hi))


def ub_upper_bound(metric, probs, labels, level: float = 0.95) -> float:
    """One-sided upper confidence bound at ``level`` of ``sqrt(theta)`` (the upper score bound
    of :func:`ub_interval` at the one-sided quantile ``z_level``). A calibrator is
    "calibrated within delta" at this level when the bound is below delta (no multiplicity
    adjustment makes that easier)."""
    from calbench.metrics.unbiased import root, score_bounds

    z = _z(level, "one")
    u = ub_jackknife(metric, probs, labels)
    return float(root(score_bounds(u, z)[1]))


def ub_paired_test(metric, probs_a, probs_b, labels) -> PairedTest:
    """Two-sided test of equal population squared calibration error of two calibrators on the
    same samples: ``D = T_a - T_b`` (unclipped), ``t = D / se``, p from Student's t with
    ``df = cells - 1`` (the cells of samples sharing a bin of ``a`` and a bin of ``b``; in
    the classwise error one per class, so about normal).

    ``se^2`` is the jackknife variance of ``D`` from the leave-one-out differences
    ``T_a(-i) - T_b(-i)`` (the same sample left out of both: the pairing is kept; Efron & Stein
    1981) less its double count of ``D``'s degenerate part
    (:func:`calbench.metrics.unbiased.paired_excess`), never below half the jackknife variance.
    The plain jackknife with a normal reference rejected 1-2% of the time at alpha = 0.05 when
    both predictors are calibrated (losing power); the corrected variance with a normal
    reference 5.5-7%: when both are calibrated ``D`` is a difference of a few weighted
    ``chi^2_1 - 1`` terms, whose studentized tails the t reference with the cell count's
    degrees of freedom matches. Asymptotic (no resolution floor: ``min_p = 0``); type-I error
    and power in perf/bench_tests.py (docs/statistics.md). ``difference`` is the reported
    ``sqrt(max(T_a, 0)) - sqrt(max(T_b, 0))``, ``statistic`` is ``t``."""
    from scipy.special import stdtr

    from calbench.metrics.unbiased import jackknife_se, paired_excess, root

    pa, pb, y = _paired_inputs(probs_a, probs_b, labels)
    ua = ub_jackknife(metric, pa, y)
    ub = ub_jackknife(metric, pb, y)
    d = ua.t - ub.t
    vj = jackknife_se(ua.loo - ub.loo) ** 2
    excess, cells = paired_excess(ua, ub)
    se = math.sqrt(max(vj - excess, 0.5 * vj))
    diff = float(root(ua.t) - root(ub.t))
    if not se > 0.0:
        z = 0.0 if d == 0 else math.copysign(math.inf, d)
        return PairedTest(diff, z, 1.0 if d == 0 else 0.0, "jackknife_z", 0.0)
    z = d / se
    p = float(min(1.0, 2.0 * stdtr(max(cells - 1, 1), -abs(z))))
    return PairedTest(diff, float(z), p, "jackknife_z", 0.0)
