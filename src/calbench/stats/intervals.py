"""Bootstrap confidence intervals of a metric and of a difference of two calibrators' metrics.

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

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from calbench._checks import check_probs_labels
from calbench.metrics import INTERVALS, METRICS
from calbench.stats import common
from calbench.stats.common import interval_method, no_interval_reason, paired_inputs, resolve_metric
from calbench.stats.ub import ub_interval, ub_jackknife

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


def check_bootstrap_options(n_resamples, level, seed) -> tuple[int, float, int]:
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
    chunk = max(1, min(n_resamples, common.CHUNK_ENTRIES // max(n, 1)))
    for start in range(0, n_resamples, chunk):
        yield rng.integers(0, n, size=(min(chunk, n_resamples - start), n))


def multiplicities(idx: np.ndarray, n: int) -> np.ndarray:
    """Per-sample multiplicities of a chunk of resamples: ``(r, n)`` indices in ``[0, n)`` give
    the float64 ``(r, n)`` array whose row ``i`` is ``np.bincount(idx[i], minlength=n)``."""
    r = idx.shape[0]
    offset = (np.arange(r, dtype=np.int64) * n)[:, None]
    counts = np.bincount((idx + offset).ravel(), minlength=r * n)
    return counts.reshape(r, n).astype(np.float64)


def prepare_metric(metric, probs, labels, checked: tuple | None = None):
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


def check_interval_method(method, metric) -> str:
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
    n_resamples, level, seed = check_bootstrap_options(n_resamples, level, seed)
    if method is not None:
        method = check_interval_method(method, metric)
    else:
        check_probs_labels(probs, labels)  # bad input is reported before a missing interval
        method = check_interval_method(method, metric)
    if method == "jackknife":
        est, lo, hi = ub_interval(metric, probs, labels, level)
        return BootstrapCI(est, lo, hi, level, 0, "jackknife", est)
    estimate, values = bootstrap_values(metric, probs, labels, n_resamples, seed)
    return interval_from_values(estimate, values, level, method)


def bootstrap_cis(
    metrics: Mapping,
    probs,
    labels,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    *,
    jackknives: dict | None = None,
) -> dict[str, BootstrapCI]:
    """:func:`bootstrap_ci` of several metrics (``{key: metric}``, each with the registry's
    construction) on one set: the arrays validated once and the resampled indices of ``seed``
    drawn once for all of them (and the multiplicities of a chunk counted once), so each
    interval equals :func:`bootstrap_ci`'s. ``jackknives``: a dict receiving the
    :func:`calbench.stats.ub_jackknife` of every ``jackknife`` metric by key (one given there
    already is used), for the paired tests of the same set
    (:class:`calbench.stats.sides.PairedSides`)."""
    n_resamples, level, seed = check_bootstrap_options(n_resamples, level, seed)
    p, y = check_probs_labels(probs, labels)
    out: dict = {}
    prepared = {}
    for key, metric in metrics.items():
        method = check_interval_method(None, metric)
        if method == "jackknife":
            if jackknives is not None and key not in jackknives:
                jackknives[key] = ub_jackknife(metric, probs, labels)
            u = None if jackknives is None else jackknives[key]
            est, lo, hi = ub_interval(metric, probs, labels, level, ustat=u)
            out[key] = BootstrapCI(est, lo, hi, level, 0, "jackknife", est)
        else:
            prepared[key] = (method, *prepare_metric(resolve_metric(metric), probs, labels, (p, y)))
    values: dict = {key: [] for key in prepared}
    n = y.shape[0]
    for idx in resample_indices(n, n_resamples, seed) if prepared else ():
        w = None
        for key, (_, _, f) in prepared.items():
            if getattr(f, "uses_weights", False):
                w = multiplicities(idx, n) if w is None else w
                values[key].append(f(idx, w))
            else:
                values[key].append(f(idx))
    for key, (method, estimate, _) in prepared.items():
        out[key] = interval_from_values(estimate, np.concatenate(values[key]), level, method)
    return {key: out[key] for key in metrics}


def bootstrap_values(
    metric, probs, labels, n_resamples: int = 1000, seed: int = 0
) -> tuple[float, np.ndarray]:
    """``(estimate, values)``: the plug-in value and the ``n_resamples`` resampled values of
    :func:`bootstrap_ci` (same indices for the same seed), to build several intervals from one
    set of resamples (:func:`interval_from_values`)."""
    metric = resolve_metric(metric)
    n_resamples, _, seed = check_bootstrap_options(n_resamples, 0.95, seed)
    estimate, f = prepare_metric(metric, probs, labels)
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
    metric = resolve_metric(metric)
    n_resamples, level, seed = check_bootstrap_options(n_resamples, level, seed)
    pa, pb, y = paired_inputs(probs_a, probs_b, labels)
    method = check_interval_method(method, metric_arg)
    est_a, fa = prepare_metric(metric, probs_a, labels, (pa, y))
    est_b, fb = prepare_metric(metric, probs_b, labels, (pb, y))
    shared = getattr(fa, "uses_weights", False) and getattr(fb, "uses_weights", False)
    diffs = []
    for idx in resample_indices(pa.shape[0], n_resamples, seed):
        if shared:  # both sides evaluate the chunk from the same multiplicities
            w = multiplicities(idx, pa.shape[0])
            diffs.append(fa(idx, w) - fb(idx, w))
        else:
            diffs.append(fa(idx) - fb(idx))
    return paired_result(est_a - est_b, np.concatenate(diffs), level, method)


def paired_result(d: float, diffs: np.ndarray, level: float, method: str) -> PairedBootstrap:
    """:class:`PairedBootstrap` of the observed difference ``d`` from its resampled ``diffs``
    (:func:`paired_bootstrap`'s interval and p-value)."""
    n_resamples = int(diffs.shape[0])
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
