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

import numpy as np

from calbench.metrics.binning import (
    bin_ids,
    bin_sums,
    weight_rows,
    weighted_bincounts,
    weighted_column_sums,
    width_bin_ids,
    width_edges,
)

#: rows x classes entries a classwise pass handles at once (memory of its float64 temporaries)
_BLOCK_ENTRIES = 1 << 20


def u_terms(count, s, q):
    """Per-bin ``(S^2 - Q) / (n - 1)`` where ``n >= 2``, else 0 (any leading shape)."""
    count = np.asarray(count, dtype=np.float64)
    ok = count >= 2
    return np.where(ok, (s * s - q) / np.maximum(count - 1.0, 1.0), 0.0)


def t_from_sums(count, s, q, total, groups: int = 1):
    """``T`` from bin sums ``(..., B)`` (classwise: ``(..., K, B)`` with ``groups = K``) and the
    sample count ``total`` (``(...)``): a float for 1-D / 2-D sums, an array over leading axes."""
    u = u_terms(count, s, q).reshape(*np.shape(count)[: np.ndim(count) - (2 if groups > 1 else 1)], -1)
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
def top_sums(x: np.ndarray, target: np.ndarray, n_bins: int = 15, binning: str = "width"):
    """``(ids, d, count, S, Q)`` of confidences ``x`` against 0/1 ``target`` (validated)."""
    ids, edges = bin_ids(x, n_bins, binning)
    d = target - x
    count, s, q = bin_sums(ids, d, d * d, edges.shape[0] - 1)
    return ids, d, count.astype(np.float64), s, q


def ub_sq_from_values(
    x: np.ndarray, target: np.ndarray, n_bins: int = 15, binning: str = "width"
) -> float:
    """Unclipped top-label ``T`` of confidences ``x`` against 0/1 ``target``."""
    _, _, count, s, q = top_sums(x, target, n_bins, binning)
    return t_from_sums(count, s, q, x.shape[0])


def ub_from_values(
    x: np.ndarray, target: np.ndarray, n_bins: int = 15, binning: str = "width"
) -> float:
    """The reported top-label error ``sqrt(max(T, 0))``."""
    return float(root(ub_sq_from_values(x, target, n_bins, binning)))


def ub_top_jackknife(
    x: np.ndarray, target: np.ndarray, n_bins: int = 15, binning: str = "width"
) -> tuple[float, np.ndarray]:
    """``(T, T_loo)``: top-label ``T`` and its ``N`` leave-one-out values (the bins of the full
    sample kept: equal-width bins do not move; equal-mass bins are held at the full sample's
    edges, a fixed-bin jackknife)."""
    ids, d, count, s, q = top_sums(x, target, n_bins, binning)
    n = x.shape[0]
    total = float(u_terms(count, s, q).sum())
    delta = _loo_from_members(ids, d, count, s, q, n, 1, total)
    return total / n, (total + delta) / (n - 1)


def ub_top_weighted(x: np.ndarray, target: np.ndarray, n_bins: int = 15):
    """``g(weights)``: ``T`` of equal-width bins with per-sample multiplicities (bootstrap
    resamples; a sample drawn twice pairs with itself, as any resample of a U-statistic does)."""
    from calbench.metrics.binning import fixed_bins_weighted

    d = target - x
    ids = width_bin_ids(x, n_bins)
    return fixed_bins_weighted(ids, d, d * d, n_bins, t_from_sums, x.shape[0])


# --------------------------------------------------------------------------------------------
# classwise (one-vs-rest, G = K)
# --------------------------------------------------------------------------------------------
def classwise_bins(n: int, k: int, n_bins: int = 15, min_count: int = 0) -> int:
    """Equal-width bins per class: ``n_bins``, reduced while the average (class, bin) cell
    would hold fewer than ``min_count`` samples (``N / (K B) < min_count``), at least 1.
    ``min_count = 0`` keeps ``n_bins``."""
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
        yield slice(start, stop), ids, d


def classwise_ub_sums(p: np.ndarray, y: np.ndarray, n_bins: int = 15):
    """``(count, S, Q)``, each ``(K, n_bins)``: column j binned (equal width) against
    ``1[y == j]`` with ``d = 1[y == j] - p_j`` (validated input)."""
    n, k = p.shape
    count = np.zeros(k * n_bins)
    s = np.zeros(k * n_bins)
    q = np.zeros(k * n_bins)
    offset = np.arange(k) * n_bins
    for _, ids, d in _class_blocks(p, y, n_bins):
        key = (ids + offset).ravel()
        dv = d.ravel()
        count += np.bincount(key, minlength=k * n_bins)
        s += np.bincount(key, weights=dv, minlength=k * n_bins)
        q += np.bincount(key, weights=dv * dv, minlength=k * n_bins)
    return count.reshape(k, n_bins), s.reshape(k, n_bins), q.reshape(k, n_bins)


def cw_ub_sq(p: np.ndarray, y: np.ndarray, n_bins: int = 15) -> float:
    """Unclipped classwise ``T`` (validated input)."""
    count, s, q = classwise_ub_sums(p, y, n_bins)
    return t_from_sums(count, s, q, p.shape[0], p.shape[1])


def cw_ub_jackknife(p: np.ndarray, y: np.ndarray, n_bins: int = 15) -> tuple[float, np.ndarray]:
    """``(T, T_loo)`` of the classwise error: removing sample ``i`` changes one bin per class."""
    n, k = p.shape
    count, s, q = classwise_ub_sums(p, y, n_bins)
    total = float(u_terms(count, s, q).sum())
    count, s, q = count.ravel(), s.ravel(), q.ravel()
    offset = np.arange(k) * n_bins
    delta = np.empty(n)
    for rows, ids, d in _class_blocks(p, y, n_bins):
        key = ids + offset
        delta[rows] = _loo_from_members(key, d, count, s, q, n, k, total).sum(axis=1)
    return total / (n * k), (total + delta) / ((n - 1) * k)


def cw_ub_weighted(p: np.ndarray, y: np.ndarray, n_bins: int = 15):
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


def jackknife_se(loo: np.ndarray) -> float:
    """Jackknife standard error ``sqrt((N - 1)/N sum (T_(-i) - mean)^2)`` (Efron & Stein 1981;
    Efron & Tibshirani 1993, eq. 11.5)."""
    loo = np.asarray(loo, dtype=np.float64)
    n = loo.shape[0]
    return float(np.sqrt((n - 1) / n * np.sum((loo - loo.mean()) ** 2)))
