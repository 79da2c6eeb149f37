"""One-vs-rest isotonic regression on softmax columns (``iso``), vectorised.

Zadrozny & Elkan 2002, "Transforming classifier scores into accurate multiclass probability
estimates" (KDD): for each class ``j`` fit a non-decreasing map ``f_j`` minimising
``sum_i (f_j(p_ij) - 1[y_i = j])^2`` (pool-adjacent-violators), then renormalise each row of
``[f_j(p_ij)]_j``.  Guo et al. 2017 sec. 4.1 use the same one-vs-rest reduction.

The result equals scikit-learn's ``IsotonicRegression(increasing=True, out_of_bounds="clip",
y_min=0, y_max=1)`` fitted per class, including its two details: scores closer than
``numpy.finfo(float64).resolution`` (1e-15) to the first score of a group are pooled with it
(sorted left to right), and predictions interpolate linearly between the fitted points and clip
outside the fitted range.

Speed.  Only positives (``y == j``) move the fit of column ``j``: every score below the smallest
positive score ``q_j`` belongs to a leading run of negatives whose fitted value is 0 and which
never pools with later points.  So the fit only needs the scores ``>= c_j``, where ``c_j`` is the
largest score at least ``4 eps`` below ``q_j`` (``eps`` the tie tolerance, 1e-15 for float64 and
1e-6 for float32 scores; the run's last point, the knot where the fitted map leaves 0).  That is
exact when ``c_j`` starts a new pooling group, i.e. when the next lower score is at least ``eps``
below it; otherwise ``c_j`` moves down to the largest such score (which always starts a group),
and only when there is none is the whole column used.  The thresholds come from
a few whole-matrix passes; each column then sorts and pools only its few kept scores and calls
``scipy.optimize.isotonic_regression``.  Prediction likewise interpolates only the entries at or
above each column's first knot.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calbench.calibrators.base import Calibrator, Field, register, rises_within
from calbench.calibrators.binning import renormalise_rows
from calbench.calibrators.precision import check_precision, softmax_in

#: scikit-learn's tie tolerance in ``_make_unique`` for float64 scores.
TIE_EPS = float(np.finfo(np.float64).resolution)


def tie_eps(dtype) -> np.floating:
    """scikit-learn's tie tolerance for scores of ``dtype``: ``finfo(dtype).resolution`` (1e-15
    for float64, 1e-6 for float32), as a scalar of that dtype."""
    dt = np.dtype(dtype)
    return dt.type(np.finfo(dt).resolution)


def pool_ties(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pool sorted scores ``x`` into groups as scikit-learn's isotonic fit does.

    A group starts at a score ``x0`` and holds every following score with ``x - x0 < eps``,
    ``eps`` = :func:`tie_eps` of ``x``'s dtype, the difference computed in that dtype (float32
    scores: 1e-6 in float32 arithmetic, as scikit-learn on float32 input).
    Returns the group starts (the scores kept as fit points), the mean of ``y`` per group (float64)
    and the group sizes.  ``x`` must be sorted ascending.
    """
    eps = tie_eps(x.dtype)
    n = x.size
    gaps = np.diff(x)
    new = np.empty(n, dtype=bool)
    new[0] = True
    new[1:] = gaps >= eps
    near = (gaps > 0) & (gaps < eps)
    if np.any(near):
        # clusters of scores linked by gaps < eps: walk the group starts inside each cluster
        linked = np.flatnonzero(gaps < eps)
        breaks = np.flatnonzero(np.diff(linked) > 1)
        nxt = _next_group_start(x, eps).tolist()
        for lo, hi in zip(
            np.r_[linked[0], linked[breaks + 1]], np.r_[linked[breaks], linked[-1]], strict=True
        ):
            first, last = lo, hi + 1  # cluster spans x[first..last]
            cur = first  # a group start (the gap before it is >= eps, or it is x[0])
            while nxt[cur] <= last:  # follow the chain of group starts through the cluster
                cur = nxt[cur]
                new[cur] = True
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, n)).astype(np.float64)
    sums = np.add.reduceat(np.asarray(y, dtype=np.float64), starts)
    return x[starts], sums / sizes, sizes


def _next_group_start(seg: np.ndarray, eps) -> np.ndarray:
    """For each ``i``, the first ``j > i`` with ``seg[j] - seg[i] >= eps`` (``seg.size`` if none),
    comparisons in ``seg``'s dtype; ``seg`` sorted.  Bisects on ``seg + eps`` and then settles
    the rounding of that sum with exact comparisons (a few vectorised steps)."""
    m = seg.size
    idx = np.arange(m)
    j = np.maximum(np.searchsorted(seg, seg + eps, side="left"), idx + 1)
    while True:  # step back while the previous score also qualifies
        back = (j > idx + 1) & (seg[np.minimum(j - 1, m - 1)] - seg >= eps)
        if not back.any():
            break
        j[back] -= 1
    while True:  # step forward while the score does not qualify
        fwd = (j < m) & ~(seg[np.minimum(j, m - 1)] - seg >= eps)
        if not fwd.any():
            break
        j[fwd] += 1
    return j


def isotonic_fit_1d(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fit points ``(X_thresholds_, y_thresholds_)`` of scikit-learn's increasing, clipped fit.

    ``x`` scores (any order), ``y`` targets in [0, 1].  Ties pooled (:func:`pool_ties`), PAV by
    ``scipy.optimize.isotonic_regression``, values clipped to [0, 1], and interior points whose
    value equals both neighbours' dropped (they do not change the interpolation).

    float32 ``x`` is fitted as scikit-learn fits float32 input: ties within float32's resolution
    pooled, group means rounded to float32, PAV in float64 and the fitted values rounded to
    float32 (scikit-learn >= 1.5; its older float32 PAV differs by float32 rounding only).
    The knots then have ``x``'s dtype; any other input is fitted in float64.
    """
    from scipy.optimize import isotonic_regression

    x = np.asarray(x)
    dtype = np.float32 if x.dtype == np.float32 else np.float64
    order = np.argsort(x, kind="stable")
    ux, uy, w = pool_ties(x.astype(dtype, copy=False)[order], np.asarray(y)[order])
    if dtype == np.float32:
        uy = uy.astype(np.float32).astype(np.float64)
    fitted = np.asarray(isotonic_regression(uy, weights=w, increasing=True).x, dtype=dtype)
    np.clip(fitted, 0.0, 1.0, out=fitted)
    keep = np.ones(fitted.size, dtype=bool)
    keep[1:-1] = (fitted[1:-1] != fitted[:-2]) | (fitted[1:-1] != fitted[2:])
    return ux[keep], fitted[keep]


def transpose_copy(a: np.ndarray, block: int = 128, dtype=np.float64) -> np.ndarray:
    """C-contiguous copy of ``a.T`` in ``dtype`` (default float64), copied in row blocks
    (cache-friendly, several times faster than ``np.ascontiguousarray(a.T)`` for tall
    matrices)."""
    a = np.asarray(a, dtype=dtype)
    out = np.empty(a.shape[::-1], dtype=dtype)
    for i in range(0, a.shape[0], block):
        out[:, i : i + block] = a[i : i + block].T
    return out


def _column_cut(x: np.ndarray, q: float) -> float:
    """Left end of the scores of one column that the fit needs (module docstring), or -inf.

    The tie tolerance and the arithmetic are those of ``x``'s dtype (:func:`pool_ties`)."""
    eps = tie_eps(x.dtype)
    below = x[x < q - 4 * eps]
    if below.size == 0:
        return -np.inf
    cut = below.max()
    lower = below[below < cut]
    if not lower.size or cut - lower.max() >= eps:
        return cut
    # the largest score below q - 4 eps that is at least eps above the next lower score starts a
    # pooling group (the previous group's start is at most that score); the smallest one always does
    s = np.unique(below)
    ok = np.flatnonzero(s[1:] - s[:-1] >= eps)
    return s[ok[-1] + 1] if ok.size else -np.inf


def fit_isotonic(
    probs: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One-vs-rest isotonic fit of ``probs`` (N, K) against ``labels`` (N,).

    Returns ``(knots_x, knots_y, offsets)``: class ``j``'s fit points are
    ``knots_x[offsets[j]:offsets[j+1]]`` with values ``knots_y[...]`` (see module docstring).
    float32 ``probs`` are fitted in float32 (:func:`isotonic_fit_1d`), anything else in float64.
    """
    dtype = np.float32 if np.asarray(probs).dtype == np.float32 else np.float64
    cols = transpose_copy(probs, dtype=dtype)  # (K, N): one class per row
    k, n = cols.shape
    labels = np.asarray(labels, dtype=np.int64)
    by_class = np.argsort(labels, kind="stable")
    class_off = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(labels, minlength=k), out=class_off[1:])
    kx, ky, ko = [], [], np.zeros(k + 1, dtype=np.int64)
    for j in range(k):
        x = cols[j]
        pos = by_class[class_off[j] : class_off[j + 1]]
        q = x[pos].min() if pos.size else np.inf
        keep = np.flatnonzero(x >= _column_cut(x, q))
        x_j, y_j = isotonic_fit_1d(x[keep], labels[keep] == j)
        kx.append(x_j)
        ky.append(y_j)
        ko[j + 1] = ko[j] + x_j.size
    return np.concatenate(kx), np.concatenate(ky), ko


def apply_isotonic(
    knots_x: np.ndarray, knots_y: np.ndarray, offsets: np.ndarray, probs: np.ndarray
) -> np.ndarray:
    """Evaluate the per-class fits at ``probs`` (N, K): linear interpolation, clipped ends.

    No renormalisation.  Entries at or below a class's first fit point take its value; the others
    are located among all classes' fit points at once by one ``searchsorted`` on the keys
    ``2 * class + score`` (rounding can only place a query before its exact position, never
    after, so a few vectorised forward steps on exact comparisons finish the search) and
    interpolated linearly, as ``scipy.interpolate.interp1d`` does.
    """
    probs = np.asarray(probs, dtype=np.float64)
    k = probs.shape[1]
    sizes = np.diff(offsets)
    first_x = knots_x[offsets[:-1]]
    out = np.empty_like(probs)
    out[...] = knots_y[offsets[:-1]]
    rows, cols = np.nonzero(probs > first_x)
    if rows.size == 0:
        return out
    v = probs[rows, cols]
    keys = 2.0 * np.repeat(np.arange(k, dtype=np.float64), sizes) + knots_x
    hi = np.searchsorted(keys, 2.0 * cols + v, side="left")
    end = offsets[1:][cols]
    todo = np.flatnonzero((hi < end) & (knots_x[np.minimum(hi, keys.size - 1)] < v))
    while todo.size:  # exact first knot >= v within the class
        hi[todo] += 1
        t = hi[todo]
        todo = todo[(t < end[todo]) & (knots_x[np.minimum(t, keys.size - 1)] < v[todo])]
    last = offsets[1:][cols] - 1
    hi = np.minimum(hi, last)
    lo = np.maximum(hi - 1, offsets[:-1][cols])
    x0, x1, y0, y1 = knots_x[lo], knots_x[hi], knots_y[lo], knots_y[hi]
    span = x1 - x0
    with np.errstate(invalid="ignore", divide="ignore"):
        val = y0 + (np.minimum(v, x1) - x0) * ((y1 - y0) / span)
    val = np.where(span > 0, val, y1)
    out[rows, cols] = val
    return out


def apply_isotonic_float32(
    knots_x: np.ndarray, knots_y: np.ndarray, offsets: np.ndarray, probs: np.ndarray
) -> np.ndarray:
    """:func:`apply_isotonic` in float32 arithmetic, as scikit-learn's ``IsotonicRegression``
    predicts from float32 knots (``scipy.interpolate.interp1d``, ``kind="linear"``).

    Per class: clip the scores to the first and last knot, take ``i`` = the first knot ``>=`` the
    score (at least 1, at most the last), and return
    ``(y[i] - y[i-1]) / (x[i] - x[i-1]) * (s - x[i-1]) + y[i-1]``, every operation rounded to
    float32; a class with one knot predicts its value.  Output float32 (N, K), not renormalised.
    """
    p = np.asarray(probs, dtype=np.float32)
    kx = np.asarray(knots_x, dtype=np.float32)
    ky = np.asarray(knots_y, dtype=np.float32)
    out = np.empty(p.shape, dtype=np.float32)
    for j in range(p.shape[1]):
        x, y = kx[offsets[j] : offsets[j + 1]], ky[offsets[j] : offsets[j + 1]]
        if x.size == 1:
            out[:, j] = y[0]
            continue
        s = np.clip(p[:, j], x[0], x[-1])
        hi = np.clip(np.searchsorted(x, s), 1, x.size - 1)
        lo = hi - 1
        slope = (y[hi] - y[lo]) / (x[hi] - x[lo])
        out[:, j] = slope * (s - x[lo]) + y[lo]
    return out


def knots_out_of_order(knots_x, knots_y, offsets) -> str | None:
    """Why per-class isotonic knots are not a non-decreasing map (``knots_x`` rising strictly,
    ``knots_y`` non-decreasing within each class's segment), or ``None``; shared by ``iso`` and
    ``cir``."""
    if not rises_within(knots_x, offsets):
        return "knots_x must rise strictly within each class (sorted scores)"
    if not rises_within(knots_y, offsets, strict=False):
        return "knots_y must not decrease within a class (an isotonic map)"
    return None


@register
class IsotonicCalibration(Calibrator):
    """One-vs-rest isotonic regression with renormalised rows (see module docstring).

    A row whose calibrated values are all zero becomes uniform (``binning.renormalise_rows``).
    ``precision="float32"`` reproduces the study: scikit-learn's float32 fit on float32 softmax
    probabilities, float32 predictions and renormalisation, float32 output
    (:mod:`calbench.calibrators.precision`, :func:`apply_isotonic_float32`).
    """

    name = "iso"
    reference = "Zadrozny & Elkan 2002 (isotonic regression, one-vs-rest)"

    state_schema = {
        "knots_x": Field(shape=(None,), low=0.0, high=1.0),
        "knots_y": Field(shape=(None,), low=0.0, high=1.0),
        "offsets": Field(shape=("K+1",), integer=True, low=0.0),
    }

    @classmethod
    def _check_state(cls, state: dict[str, Any], k: int) -> str | None:
        off, n = state["offsets"], len(state["knots_x"])
        if len(state["knots_y"]) != n:
            return f"knots_x has {n} entries but knots_y {len(state['knots_y'])}"
        if off[0] != 0 or off[-1] != n or np.any(np.diff(off) < 1):
            return f"offsets must rise from 0 to len(knots_x) = {n}, at least 1 knot per class"
        return knots_out_of_order(state["knots_x"], state["knots_y"], off)

    def __init__(self, *, precision: str = "float64") -> None:
        super().__init__(precision=check_precision(precision))
        self.knots_x_: np.ndarray | None = None
        self.knots_y_: np.ndarray | None = None
        self.offsets_: np.ndarray | None = None

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        probs = softmax_in(logits, self._params["precision"])
        self.knots_x_, self.knots_y_, self.offsets_ = fit_isotonic(probs, labels)

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        probs = softmax_in(logits, self._params["precision"])
        apply = apply_isotonic_float32 if probs.dtype == np.float32 else apply_isotonic
        return renormalise_rows(apply(self.knots_x_, self.knots_y_, self.offsets_, probs))

    def _get_state(self) -> dict[str, Any]:
        return {"knots_x": self.knots_x_, "knots_y": self.knots_y_, "offsets": self.offsets_}

    def _set_state(self, state: dict[str, Any]) -> None:
        dtype = np.float32 if self._params["precision"] == "float32" else np.float64
        self.knots_x_ = np.asarray(state["knots_x"], dtype=dtype)
        self.knots_y_ = np.asarray(state["knots_y"], dtype=dtype)
        self.offsets_ = np.asarray(state["offsets"], dtype=np.int64)
