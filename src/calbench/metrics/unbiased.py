"""Unbiased binned squared calibration errors (per-bin U-statistics) with leave-one-out values.

With ``d_i = target_i - value_i`` (top-label: ``target = 1[correct]``, ``value`` the top
confidence; classwise: column ``j`` against ``1[y == j]``) and, per bin ``b`` (per class and bin
classwise), ``S_b = sum d_i``, ``Q_b = sum d_i^2`` and ``n_b`` the count,

    T = 1 / (N G) * sum_g sum_{b: n_b >= 2} (S_b^2 - Q_b) / (n_b - 1)

(``G = 1`` top-label, ``G = K`` classwise). ``(S_b^2 - Q_b) / (n_b - 1) = sum_{i != j in b}
d_i d_j / (n_b - 1)`` is ``n_b`` times the U-statistic of the squared bin mean of ``d``, so given
the bins' members ``E[T] = (1/(N G)) sum n_b mu_b^2`` with ``mu_b = E[d | bin b]``: unbiased for
the population binned squared error ``sum_b P(b) mu_b^2`` whatever the predictor's sharpness or
calibration (Kumar, Liang & Ma 2019, sec. 5; Sun, Chaudhari, Barnett & Dobriban 2024,
"Confidence intervals for calibration error", the debiased estimator). Bins holding one sample
contribute 0 (a single ``d`` says nothing about ``mu_b^2``); the bias this leaves,
``-sum_b P(n_b = 1) mu_b^2 / N``, vanishes as bins fill. ``T`` may be negative; the reported
error is ``sqrt(max(T, 0))``, and intervals are built from the unclipped ``T``
(:func:`calbench.stats.ub_interval`).

Kumar et al.'s debiased error (:func:`calbench.metrics.ece.debiased_ece`,
``marginal_ce(debiased=True)``) subtracts ``acc_b (1 - acc_b) / (n_b - 1)`` from the squared gap
of the bin means: it equals this U-statistic when every value in a bin is the same, and differs
(it is biased by the within-bin spread of the values) otherwise.

The leave-one-out values ``T_(-i)`` (sample ``i`` removed from its bin(s), ``N - 1`` samples) are
exact, computed in closed form from the bin sums; they give the jackknife variance
(Efron & Stein 1981) of ``T`` and of a difference of two ``T`` on the same samples.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from calbench.metrics.binning import (
    ECE_BINS,
    bin_ids,
    bin_sums,
    fixed_bins_weighted,
    weight_rows,
    weighted_bincounts,
    weighted_column_sums,
    width_bin_ids,
    width_edges,
)

#: rows x classes entries a classwise pass handles at once (memory of its float64 temporaries)
_BLOCK_ENTRIES = 1 << 20


class UStat(NamedTuple):
    """An unbiased squared calibration error with what its intervals and tests need.

    ``t``: the unclipped ``T``; ``loo``: its ``N`` leave-one-out values ``T_(-i)``;
    ``excess``: the second-order (degenerate) variance ``D`` of ``T`` when the predictor is
    calibrated, ``sum_b 2 sum_{i != j in b} v_i v_j / ((n_b - 1)^2 (N G)^2)`` with
    ``v_i = x_i (1 - x_i)`` the variance of ``d_i`` given a calibrated value ``x_i`` (given the
    values, ``T``'s kernel ``d_i d_j`` has these pairwise variances, Hoeffding 1948); it is
    exact under ``theta = 0``, where it decides, and free of the label noise (a bin's sample
    variance of ``d``, squared, overstated it many times in thin classwise bins); the
    jackknife variance counts this part twice (Efron & Stein 1981);
    ``slope0``: ``4 s^2 / (N G)``, the fallback slope of :func:`score_bounds`; ``count``: the
    flat per-(group, bin) counts, ``bins`` the bins per group and ``members()`` an iterator of
    ``(rows, key, d)`` row blocks (``key``: the flat bin of every entry, ``(r, G)``), which
    :func:`paired_excess` needs; ``thin``: why no interval is given (empty when one is,
    :func:`cw_thin_reason`).
    """

    t: float
    loo: np.ndarray
    excess: float
    slope0: float
    count: np.ndarray | None = None
    bins: int = 0
    members: object = None
    thin: str = ""


def variance_parts(count, s, q, sv, sv2, total, groups: int = 1) -> tuple[float, float]:
    """``(excess, slope0)`` of :class:`UStat` from bin sums (bins with ``n_b >= 2``): ``sv`` and
    ``sv2`` are the bins' sums of ``v_i = x_i (1 - x_i)`` and of ``v_i^2``."""
    count = np.asarray(count, dtype=np.float64)
    ok = count >= 2
    m1 = np.maximum(count - 1.0, 1.0)
    pairs = np.where(ok, 2.0 * (sv * sv - sv2) / (m1 * m1), 0.0)
    var = np.where(ok, (q - s * s / np.maximum(count, 1.0)) / m1, 0.0)
    ng = float(total) * groups
    pooled = float(np.sum(count * var) / max(float(np.sum(count[ok])), 1.0))
    return float(pairs.sum() / ng**2), 4.0 * pooled / ng


def score_bounds(u: UStat, z: float) -> tuple[float, float]:
    """Bounds ``(low, high)`` on the population squared error ``theta`` (clipped at 0): the
    ``theta >= 0`` that a z-test of ``T`` with null variance ``V(theta) = a theta + D`` does
    not reject at the normal quantile ``z``, i.e. the roots of ``(T - theta)^2 = z^2 V(theta)``
    (a score interval, as Wilson's for a proportion).

    ``D`` (:attr:`UStat.excess`) is the variance of ``T`` when the predictor is calibrated in
    every bin (the U-statistic is then degenerate: Hoeffding 1948). The linear part grows with
    ``theta``: ``4 sum_b P(b) mu_b^2 sigma_b^2 / (N G)``; its slope ``a`` is estimated as the
    jackknife variance less its double count of the degenerate part (Efron & Stein 1981),
    ``V_jack - 2 D``, divided by ``T`` (both measure the same bins' miscalibration, so the ratio
    is stable when ``T`` is near 0), or, when either is not positive, ``4 s^2 / (N G)`` with
    ``s^2`` the bins' pooled variance of ``d``. A studentized ``(T - theta) / se_jack`` is no
    use near a calibrated predictor: its jackknife variance grows with ``T`` itself, so the
    plain jackknife interval covered a true 0 in 100% of simulated test sets."""
    t = float(u.t)
    vj = float(np.var(u.loo) * (u.loo.shape[0] - 1))
    lin = vj - 2.0 * u.excess
    a = lin / t if (lin > 0.0 and t > 0.0) else u.slope0
    a = max(a, 0.0)
    half = t + z * z * a / 2.0
    disc = z * z * (a * t + z * z * a * a / 4.0 + u.excess)
    if disc < 0.0:
        return 0.0, 0.0
    r = float(np.sqrt(disc))
    return max(half - r, 0.0), max(half + r, 0.0)


def u_terms(count, s, q):
    """Per-bin ``(S^2 - Q) / (n - 1)`` where ``n >= 2``, else 0 (any leading shape)."""
    count = np.asarray(count, dtype=np.float64)
    ok = count >= 2
    return np.where(ok, (s * s - q) / np.maximum(count - 1.0, 1.0), 0.0)


def t_from_sums(count, s, q, total, groups: int = 1):
    """``T`` from bin sums ``(..., B)`` (classwise: ``(..., K, B)`` with ``groups = K``) and the
    sample count ``total`` (``(...)``): a float for 1-D / 2-D sums, an array over leading axes."""
    u = u_terms(count, s, q).reshape(
        *np.shape(count)[: np.ndim(count) - (2 if groups > 1 else 1)], -1
    )
    out = u.sum(axis=-1) / (np.asarray(total, dtype=np.float64) * groups)
    return float(out) if np.ndim(out) == 0 else out


def root(t):
    """The reported error ``sqrt(max(T, 0))``."""
    return np.sqrt(np.maximum(t, 0.0))


def _loo_from_members(ids, d, count, s, q, n: int, groups: int, u_total):
    """Per entry: ``U_b^(-i) - U_b`` of the bin of entry (sample i, bin ids)."""
    c = count[ids]
    s2, q2 = s[ids] - d, q[ids] - d * d
    new = np.where(c - 1 >= 2, (s2 * s2 - q2) / np.maximum(c - 2.0, 1.0), 0.0)
    old = u_terms(c, s[ids], q[ids])
    return new - old


# --------------------------------------------------------------------------------------------
# top-label
# --------------------------------------------------------------------------------------------
def top_sums(x: np.ndarray, target: np.ndarray, n_bins: int = ECE_BINS, binning: str = "width"):
    """``(ids, d, count, S, Q)`` of confidences ``x`` against 0/1 ``target`` (validated)."""
    ids, edges = bin_ids(x, n_bins, binning)
    d = target - x
    count, s, q = bin_sums(ids, d, d * d, edges.shape[0] - 1)
    return ids, d, count.astype(np.float64), s, q


def _null_sums(ids, x, size: int):
    """Per-bin sums of ``v = x (1 - x)`` and ``v^2`` (:func:`variance_parts`)."""
    v = x * (1.0 - x)
    _, sv, sv2 = bin_sums(ids, v, v * v, size)
    return sv, sv2


def ub_sq_from_values(
    x: np.ndarray, target: np.ndarray, n_bins: int = ECE_BINS, binning: str = "width"
) -> float:
    """Unclipped top-label ``T`` of confidences ``x`` against 0/1 ``target``."""
    _, _, count, s, q = top_sums(x, target, n_bins, binning)
    return t_from_sums(count, s, q, x.shape[0])


def ub_from_values(
    x: np.ndarray, target: np.ndarray, n_bins: int = ECE_BINS, binning: str = "width"
) -> float:
    """The reported top-label error ``sqrt(max(T, 0))``."""
    return float(root(ub_sq_from_values(x, target, n_bins, binning)))


def ub_top_jackknife(
    x: np.ndarray, target: np.ndarray, n_bins: int = ECE_BINS, binning: str = "width"
) -> UStat:
    """Top-label ``T``, its ``N`` leave-one-out values and variance excess (:class:`UStat`; the
    bins of the full sample kept: equal-width bins do not move; equal-mass bins are held at the
    full sample's edges, a fixed-bin jackknife)."""
    ids, d, count, s, q = top_sums(x, target, n_bins, binning)
    n = x.shape[0]
    total = float(u_terms(count, s, q).sum())
    delta = _loo_from_members(ids, d, count, s, q, n, 1, total)
    sv, sv2 = _null_sums(ids, x, count.shape[0])
    parts = variance_parts(count, s, q, sv, sv2, n)

    def members():
        yield slice(0, n), ids[:, None], d[:, None]

    return UStat(total / n, (total + delta) / (n - 1), *parts, count, count.shape[0], members)


def ub_top_weighted(x: np.ndarray, target: np.ndarray, n_bins: int = ECE_BINS):
    """``g(weights)``: ``T`` of equal-width bins with per-sample multiplicities (bootstrap
    resamples; a sample drawn twice pairs with itself, as any resample of a U-statistic does)."""
    d = target - x
    ids = width_bin_ids(x, n_bins)
    return fixed_bins_weighted(ids, d, d * d, n_bins, t_from_sums, x.shape[0])


# --------------------------------------------------------------------------------------------
# classwise (one-vs-rest, G = K)
# --------------------------------------------------------------------------------------------
#: the classwise error's smallest average count of a class's predicted samples per bin
CW_MIN_COUNT = 2


#: the classwise error's intervals need this many samples per class on average
CW_MIN_PER_CLASS = 10


def cw_thin_reason(n: int, k: int) -> str:
    """Why the classwise error of ``n`` samples and ``k`` classes gets no interval ("" when it
    gets one): below :data:`CW_MIN_PER_CLASS` samples per class the bins above each class's
    lowest hold a handful of samples, the U-statistic is far from normal, and the interval
    covered an over-confident model's value in 88.5% of simulated test sets at K = 100,
    N = 500 (perf/bench_coverage.py)."""
    if n >= CW_MIN_PER_CLASS * k:
        return ""
    return (
        f"{n} samples for {k} classes (fewer than {CW_MIN_PER_CLASS} per class): the "
        "classwise bins hold a handful of samples each and no interval covered the population "
        "value in 90-99% of simulated test sets (88.5% at K = 100, N = 500)"
    )


def classwise_bins(n: int, k: int, n_bins: int = ECE_BINS, min_count: float = CW_MIN_COUNT) -> int:
    """Equal-width bins per class of the classwise error: ``n_bins``, fewer while the ``N / K``
    samples a class is expected to be predicted for would average fewer than ``min_count`` per
    bin (``N / (K B) < min_count``), at least 1: ``min(n_bins, max(1, floor(N / (min_count
    K))))``. A bin holding one sample contributes nothing, which biases ``T`` down by the
    miscalibration of the bins likely to be singletons: with 15 bins, K = 100 and N = 500 the
    interval of an over-confident model covered its population value in 75% of simulated test
    sets, with this rule (2 bins there; 15 from N = 3,000 at K = 100 and from N = 300 at
    K = 10) in 90-99% (perf/bench_coverage.py). The population value is that of the same
    ``B`` bins."""
    b = n_bins
    while b > 1 and min_count > 0 and n / (k * b) < min_count:
        b -= 1
    return b


def _class_blocks(p: np.ndarray, y: np.ndarray, n_bins: int):
    """Yield ``(rows, ids, d)`` over row blocks: bin ids and ``d = 1[y == j] - p_ij`` of every
    entry ``(N_block, K)``."""
    n, k = p.shape
    step = max(1, _BLOCK_ENTRIES // k)
    for start in range(0, n, step):
        stop = min(n, start + step)
        block = np.asarray(p[start:stop], dtype=np.float64)
        ids = width_bin_ids(block, n_bins)
        d = -block
        d[np.arange(stop - start), y[start:stop]] += 1.0
        yield slice(start, stop), ids, d, block


def classwise_ub_sums(p: np.ndarray, y: np.ndarray, n_bins: int = ECE_BINS, null: bool = False):
    """``(count, S, Q)``, each ``(K, n_bins)``: column j binned (equal width) against
    ``1[y == j]`` with ``d = 1[y == j] - p_j`` (validated input); with ``null``, also the sums
    of ``v = p (1 - p)`` and ``v^2`` (:func:`variance_parts`)."""
    n, k = p.shape
    size = k * n_bins
    sums = np.zeros((5 if null else 3, size))
    offset = np.arange(k) * n_bins
    for _, ids, d, x in _class_blocks(p, y, n_bins):
        key = (ids + offset).ravel()
        dv = d.ravel()
        parts = [None, dv, dv * dv]
        if null:
            v = (x * (1.0 - x)).ravel()
            parts += [v, v * v]
        for row, w in zip(sums, parts, strict=True):
            row += np.bincount(key, weights=w, minlength=size)
    return tuple(row.reshape(k, n_bins) for row in sums)


def cw_ub_sq(p: np.ndarray, y: np.ndarray, n_bins: int = ECE_BINS) -> float:
    """Unclipped classwise ``T`` (validated input)."""
    count, s, q = classwise_ub_sums(p, y, n_bins)
    return t_from_sums(count, s, q, p.shape[0], p.shape[1])


def cw_ub_jackknife(p: np.ndarray, y: np.ndarray, n_bins: int = ECE_BINS) -> UStat:
    """:class:`UStat` of the classwise error: removing sample ``i`` changes one bin per class."""
    n, k = p.shape
    count, s, q, sv, sv2 = classwise_ub_sums(p, y, n_bins, null=True)
    parts = variance_parts(count, s, q, sv, sv2, n, k)
    total = float(u_terms(count, s, q).sum())
    count, s, q = count.ravel(), s.ravel(), q.ravel()
    offset = np.arange(k) * n_bins
    delta = np.empty(n)
    for rows, ids, d, _ in _class_blocks(p, y, n_bins):
        key = ids + offset
        delta[rows] = _loo_from_members(key, d, count, s, q, n, k, total).sum(axis=1)

    def members():
        for rows, ids, d, _ in _class_blocks(p, y, n_bins):
            yield rows, ids + offset, d

    loo = (total + delta) / ((n - 1) * k)
    return UStat(total / (n * k), loo, *parts, count, n_bins, members, cw_thin_reason(n, k))


def cw_ub_weighted(p: np.ndarray, y: np.ndarray, n_bins: int = ECE_BINS):
    """``g(weights)``: classwise ``T`` with per-sample multiplicities (bootstrap). As in
    :func:`calbench.metrics.binning.onevsrest_binner`, only entries ``>= 1/n_bins`` are binned
    explicitly; bin 0 of each class is the column total minus the other bins."""
    n, k = p.shape
    threshold = float(width_edges(n_bins)[1]) if n_bins > 1 else np.inf
    flat = np.flatnonzero(p >= threshold) if n_bins > 1 else np.empty(0, np.int64)
    rows = flat // k
    vals = p.reshape(-1)[flat].astype(np.float64)
    key = (flat - rows * k) * n_bins + width_bin_ids(vals, n_bins)
    py = p[np.arange(n), y].astype(np.float64)
    label_key = y * n_bins + width_bin_ids(py, n_bins)
    size = k * n_bins
    binned = weighted_bincounts(
        [
            (key, rows, None),
            (key, rows, vals),
            (key, rows, vals * vals),
            (label_key, None, None),
            (label_key, None, py),
        ],
        size,
        n,
    )
    p64 = np.asarray(p, dtype=np.float64)
    p2 = p64 * p64

    def g(weights=None):
        w, batched = weight_rows(np.ones(n) if weights is None else weights, n)
        r = w.shape[0]
        count, sp, sp2, sl, slp = (a.reshape(r, k, n_bins) for a in binned(w))
        count[:, :, 0] = w.sum(axis=1)[:, None] - count[:, :, 1:].sum(axis=2)
        sp[:, :, 0] = weighted_column_sums(w, p64) - sp[:, :, 1:].sum(axis=2)
        sp2[:, :, 0] = weighted_column_sums(w, p2) - sp2[:, :, 1:].sum(axis=2)
        s = sl - sp
        q = sl - 2.0 * slp + sp2
        out = t_from_sums(count, s, q, w.sum(axis=1), k)
        out = np.atleast_1d(np.asarray(out, dtype=np.float64))
        return out if batched else float(out[0])

    return g


def paired_excess(a: UStat, b: UStat) -> tuple[float, int]:
    """``(excess, cells)``: the jackknife's double count of the degenerate part of
    ``D = T_a - T_b`` (same samples) and the number of cells holding >= 2 samples (the
    degrees of freedom of :func:`calbench.stats.ub_paired_test`'s t reference). The excess is
    ``D_a + D_b - 2 C`` with ``D`` of :class:`UStat` and ``C`` the covariance of the two
    degenerate parts, ``2 / (N G)^2 sum_cells sum_{i != j in cell} c_i c_j / ((n_a - 1)
    (n_b - 1))`` over the cells of samples sharing a bin of ``a`` and a bin of ``b``, with
    ``c_i = d^a_i d^b_i`` (unbiased for ``E[e^a_i e^b_i]`` when both are calibrated, as the
    products over distinct pairs are). Exact expectations: Hoeffding 1948."""
    size_b = b.bins
    occupied = np.zeros(a.count.shape[0] * size_b)
    n_cells = a.count.shape[0] * size_b
    c1 = np.zeros(n_cells)
    c2 = np.zeros(n_cells)
    for (_, key_a, d_a), (_, key_b, d_b) in zip(a.members(), b.members(), strict=True):
        cell = (key_a * size_b + key_b % size_b).ravel()
        c = (d_a * d_b).ravel()
        c1 += np.bincount(cell, weights=c, minlength=n_cells)
        c2 += np.bincount(cell, weights=c * c, minlength=n_cells)
        occupied += np.bincount(cell, minlength=n_cells)
    n_a = np.repeat(a.count, size_b)
    n_b = _b_counts(a, b)
    ok = (n_a >= 2) & (n_b >= 2)
    denom = np.maximum(n_a - 1.0, 1.0) * np.maximum(n_b - 1.0, 1.0)
    n = a.loo.shape[0]
    groups = a.count.shape[0] // max(a.bins, 1)
    cov = float(np.sum(np.where(ok, 2.0 * (c1 * c1 - c2) / denom, 0.0))) / (n * groups) ** 2
    return a.excess + b.excess - 2.0 * cov, int(np.count_nonzero(occupied >= 2))


def _b_counts(a: UStat, b: UStat) -> np.ndarray:
    """``n_b`` of every cell ``key_a * bins_b + local_b`` (the group of ``key_a``)."""
    groups = a.count.shape[0] // a.bins
    group_of_key_a = np.arange(a.count.shape[0]) // a.bins
    counts_b = b.count.reshape(groups, b.bins)
    return counts_b[group_of_key_a].ravel()


def jackknife_se(loo: np.ndarray) -> float:
    """Jackknife standard error ``sqrt((N - 1)/N sum (T_(-i) - mean)^2)`` (Efron & Stein 1981;
    Efron & Tibshirani 1993, eq. 11.5)."""
    loo = np.asarray(loo, dtype=np.float64)
    n = loo.shape[0]
    return float(np.sqrt((n - 1) / n * np.sum((loo - loo.mean()) ** 2)))
