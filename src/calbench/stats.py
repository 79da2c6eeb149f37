"""Bootstrap confidence intervals for metrics and paired comparisons of two calibrators.

Percentile bootstrap over samples (Efron & Tibshirani 1993, ch. 13): each resample draws N
sample indices with replacement; the interval is the ``(1 - level)/2`` and ``(1 + level)/2``
quantiles (numpy's default linear interpolation) of the resampled metric values. The paired
version applies the same resampled indices to both sets of probabilities, so shared sample
difficulty cancels in the difference.

Resampled indices come from ``numpy.random.default_rng(seed)``, drawn in chunks of
``max(1, min(n_resamples, 2**21 // N))`` resamples; both functions draw the same indices for the
same ``(seed, N, n_resamples)``. Metrics of :data:`calbench.metrics.METRICS` that decompose into
per-sample arrays are resampled through those arrays (means fully vectorised); cwECE and the
marginal CE are re-evaluated with per-sample multiplicities ``bincount(idx)`` (one
matrix-vector product per resample); any other callable ``metric(probs, labels) -> float`` is
evaluated on ``probs[idx], labels[idx]``. All three routes give the same values up to rounding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from calbench._checks import check_labels, check_probs, check_probs_labels

_CHUNK_ENTRIES = 2**21


@dataclass(frozen=True)
class BootstrapCI:
    """Percentile bootstrap interval of one metric."""

    estimate: float
    low: float
    high: float
    level: float
    n_resamples: int


@dataclass(frozen=True)
class PairedBootstrap:
    """Paired bootstrap of ``metric(a) - metric(b)``.

    ``p_value`` is two-sided: ``min(1, 2 min(share of resampled differences <= 0, share >= 0))``,
    i.e. twice the share of resampled differences on the far side of 0 from the bulk (0 itself
    counts on both sides, so identical inputs give 1). Its resolution is ``2 / n_resamples``;
    0 means "below that".
    """

    difference: float
    low: float
    high: float
    p_value: float
    level: float
    n_resamples: int


def _resolve(metric) -> Callable:
    if isinstance(metric, str):
        from calbench.metrics import METRICS

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


def _prepare(metric, probs, labels):
    """Return ``(estimate, f)`` where ``f(idx_chunk) -> values`` evaluates resamples."""
    dtype = getattr(probs, "dtype", None)
    stats = getattr(metric, "stats", None)
    reduce = getattr(metric, "reduce", None)
    p, y = check_probs_labels(probs, labels)
    weighted = getattr(metric, "weighted", None)
    if weighted is not None:
        g = weighted(p, y, dtype)
        n = p.shape[0]

        def f(idx):
            return np.array([g(np.bincount(row, minlength=n)) for row in idx])

        return float(g(None)), f
    if stats is not None and reduce is not None:
        arrays = stats(p, y, dtype)
        estimate = float(reduce(*arrays))
        if getattr(metric, "is_mean", False):
            (x,) = arrays

            def f(idx):
                return x[idx].mean(axis=1)
        else:

            def f(idx):
                return np.array([reduce(*(a[row] for a in arrays)) for row in idx])

        return estimate, f
    estimate = float(metric(p, y))

    def f(idx):
        return np.array([float(metric(p[row], y[row])) for row in idx])

    return estimate, f


def _interval(values: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(values, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(lo), float(hi)


def bootstrap_ci(
    metric, probs, labels, n_resamples: int = 1000, level: float = 0.95, seed: int = 0
) -> BootstrapCI:
    """Percentile bootstrap confidence interval of ``metric(probs, labels)`` over samples.

    ``metric`` is a callable ``f(probs, labels) -> float`` or a name in
    :data:`calbench.metrics.METRICS`. Deterministic for a given ``seed``.
    """
    metric = _resolve(metric)
    n_resamples, level, seed = _check_options(n_resamples, level, seed)
    estimate, f = _prepare(metric, probs, labels)
    n = np.shape(labels)[0]
    values = np.concatenate([f(idx) for idx in resample_indices(n, n_resamples, seed)])
    low, high = _interval(values, level)
    return BootstrapCI(estimate, low, high, level, n_resamples)


def paired_bootstrap(
    metric,
    probs_a,
    probs_b,
    labels,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> PairedBootstrap:
    """Paired percentile bootstrap of ``metric(probs_a) - metric(probs_b)`` on the same labels.

    Every resample uses the same sample indices for both inputs. A negative difference of an
    error metric means ``a`` is better. See :class:`PairedBootstrap` for the p-value.
    """
    metric = _resolve(metric)
    n_resamples, level, seed = _check_options(n_resamples, level, seed)
    pa = check_probs(probs_a, "probs_a")
    pb = check_probs(probs_b, "probs_b")
    if pa.shape != pb.shape:
        raise ValueError(
            f"probs_a has shape {pa.shape} but probs_b has shape {pb.shape}; "
            "pass both calibrators' probabilities for the same samples and classes"
        )
    check_labels(labels, pa.shape[0], pa.shape[1])
    est_a, fa = _prepare(metric, probs_a, labels)
    est_b, fb = _prepare(metric, probs_b, labels)
    diffs = np.concatenate(
        [fa(idx) - fb(idx) for idx in resample_indices(pa.shape[0], n_resamples, seed)]
    )
    low, high = _interval(diffs, level)
    share = min(np.mean(diffs <= 0.0), np.mean(diffs >= 0.0))
    p_value = float(min(1.0, 2.0 * share))
    return PairedBootstrap(est_a - est_b, low, high, p_value, level, n_resamples)
