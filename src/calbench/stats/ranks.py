"""Comparisons of calibrators over many models: average ranks, the Friedman test and the
Nemenyi critical difference (Demšar 2006, §3.2.2), together in :func:`rank_comparison` (the
report's ranks section renders it); and the ranks of one model's calibrators
(:func:`ranks_nan_last`, the robustness section's)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


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


def ranks_nan_last(values) -> np.ndarray:
    """Ranks of ``values`` (1 = smallest; ties share their average rank; NaN ranks last)."""
    v = np.asarray(values, dtype=np.float64)
    return mean_ranks(np.where(np.isfinite(v), v, np.inf))


def spearman(x, y) -> float:
    """Spearman's (1904) rank correlation of ``x`` and ``y``: Pearson's correlation of their
    mean ranks, computed as ``scipy.stats.spearmanr(x, y).statistic`` does (the same float)
    without importing ``scipy.stats``; NaN with fewer than 3 pairs or a constant ``y``."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-D of one length, got shapes {x.shape} and {y.shape}")
    if len(x) < 3 or np.allclose(y, y[0]):
        return math.nan
    r = mean_ranks(np.column_stack([x, y]).T).T
    return float(np.corrcoef(r, rowvar=False)[1, 0])


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


@dataclass(frozen=True)
class RankComparison:
    """Average ranks of ``k`` methods over the ``n`` complete rows (models) of a table, and with
    ``n >= 2`` the Friedman test (:func:`friedman_test`), the Nemenyi critical difference ``cd``
    at ``alpha`` (:func:`nemenyi_cd`), whether the Iman-Davenport test rejects at ``alpha``
    (``rejects``: Demšar 2006 reads the Nemenyi groups only then) and the columns whose average
    rank exceeds the best one's by more than ``cd`` (``worse_than_best``); ``None``, ``None``,
    ``False`` and ``()`` with one row."""

    n: int
    average_ranks: tuple
    friedman: Friedman | None
    cd: float | None
    rejects: bool
    worse_than_best: tuple


def rank_comparison(values, higher_is_better: bool = False, alpha: float = 0.05) -> RankComparison:
    """:class:`RankComparison` of the rows of ``values`` (models x methods) without a NaN; needs
    at least one complete row and two methods. Any number of rows and methods: the Friedman and
    Nemenyi statistics are closed forms in ``n`` and ``k``."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"values must be a 2-D array (models x methods), got shape {x.shape}")
    x = x[np.all(np.isfinite(x), axis=1)]
    n, k = x.shape
    if n < 1 or k < 2:
        raise ValueError(
            f"ranks need >= 1 complete row and >= 2 methods, got {n} x {k}; "
            "drop the models that lack a value"
        )
    r = rank_rows(x, higher_is_better).mean(axis=0)
    ranks = tuple(float(v) for v in r)
    if n < 2:
        return RankComparison(n, ranks, None, None, False, ())
    fr = friedman_test(x, higher_is_better)
    cd = nemenyi_cd(k, n, alpha)
    best = min(ranks)
    worse = tuple(j for j, v in enumerate(ranks) if v - best > cd)
    return RankComparison(n, ranks, fr, cd, fr.p_f < alpha, worse)
