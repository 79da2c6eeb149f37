"""Binning calibrators on softmax columns: histogram binning (``hist``) and BBQ (``bbq``).

Both are one-vs-rest: class ``j``'s column ``p_j = softmax(z)_j`` is calibrated as a binary
problem against ``1[y == j]``, then each row is divided by its sum (Zadrozny & Elkan 2002's
multiclass reduction, as in the replicated study).  A row whose calibrated values are all zero
cannot be renormalised; it becomes the uniform distribution ``1/K`` (documented choice; the
study's code would produce NaN there).

**Histogram binning** (Zadrozny & Elkan 2001; Guo et al. 2017 sec. 4.1): ``M`` equal-width bins
on [0, 1] with the metrics' edge convention (half-open ``[a, b)``, a probability of exactly 1 in
the last bin).  ``theta_m`` = fraction of positives among the validation samples in bin ``m``
(the minimiser of ``sum_m sum_i 1(p_i in B_m) (theta_m - y_i)^2``); an empty bin gets its centre.

**BBQ** (Naeini, Cooper & Hauskrecht 2015, "Obtaining well calibrated probabilities using
Bayesian binning", AAAI).  Model space: equal-frequency binnings of the sorted validation
scores with ``B`` bins for every ``B`` in ``[max(1, floor(N^(1/3) / C)), ceil(C N^(1/3))]``
(paper sec. "Bayesian binning into quantiles", ``C = 10``), capped at ``N`` bins, uniform prior
over models.  Each model's BDeu marginal likelihood (paper eq. 3, equivalent sample size
``N' = 2``, Beta prior ``Beta(alpha_b, beta_b)`` with ``alpha_b = N'/B * e_b`` and
``beta_b = N'/B * (1 - e_b)``, ``e_b`` = midpoint of bin ``b``'s score interval)::

    Score(M) = prod_b  Gamma(N'/B) / Gamma(n_b + N'/B)
                     * Gamma(m_b + alpha_b) / Gamma(alpha_b)
                     * Gamma(n_b - m_b + beta_b) / Gamma(beta_b)

(``n_b`` samples, ``m_b`` positives in bin ``b``).  The calibrated value is the model average
(paper eq. 2) of the Beta posterior means ``(m_b + alpha_b) / (n_b + alpha_b + beta_b)``,
weighted by ``Score(M) / sum Score``.  Bin interval ``b`` of a model runs from the score midway
between the last sample of bin ``b-1`` and the first of bin ``b`` (0 and 1 at the ends); a new
score falls in the bin whose interval holds it (``[a, b)``).  Cost is O(K N B_max) per fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calbench._checks import check_n_bins
from calbench.calibrators.base import Calibrator, Field, register, rises_within
from calbench.calibrators.precision import check_precision, softmax_in

#: Entries per row block in :func:`apply_histogram_binning` (256 KiB of float64).
_BLOCK_ENTRIES = 1 << 15


def renormalise_rows(values: np.ndarray) -> np.ndarray:
    """Divide each row by its sum; rows summing to 0 become uniform ``1/K`` (in place, returned)."""
    sums = values.sum(axis=1, keepdims=True)
    zero = sums[:, 0] <= 0
    if np.any(zero):
        values[zero] = 1.0
        sums[zero] = values.shape[1]
    values /= sums
    return values


def equal_width_bin_index(probs: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin index in ``[0, n_bins)`` of each probability for edges ``linspace(0, 1, n_bins + 1)``.

    Half-open bins ``[a, b)``; a probability of exactly 1 falls in the last bin.  Equal to
    ``searchsorted(edges, p, side="right") - 1`` clipped to the last bin, but computed as
    ``floor(p * n_bins)`` with an exact ``searchsorted`` only for the few values within 1e-9 of
    an edge (where rounding of the product could pick the neighbouring bin).
    """
    scaled = probs * n_bins
    idx = scaled.astype(np.intp)
    frac = scaled - idx
    near = np.flatnonzero((frac < 1e-9) | (frac > 1 - 1e-9))
    if near.size:
        edges = np.linspace(0.0, 1.0, n_bins + 1)
        flat = idx.reshape(-1)
        flat[near] = np.searchsorted(edges, probs.reshape(-1)[near], side="right") - 1
    np.minimum(idx, n_bins - 1, out=idx)
    return idx


def entries_above_first_bin(probs: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat (C-order) positions and bin indices of the entries of ``probs`` outside bin 0.

    An entry below the first inner edge ``1 / n_bins`` is in bin 0; a softmax row has at most
    ``n_bins`` entries at or above it (usually one or two), so one comparison pass over the
    array and an exact :func:`equal_width_bin_index` on the few remaining entries bin the whole
    array.  ``probs`` must be a C-contiguous float64 array.
    """
    if n_bins == 1:
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.intp)
    first_edge = np.linspace(0.0, 1.0, n_bins + 1)[1]
    flat = np.flatnonzero(probs >= first_edge)
    return flat, equal_width_bin_index(probs.reshape(-1)[flat], n_bins)


def _as_c_float64(probs) -> np.ndarray:
    return np.ascontiguousarray(probs, dtype=np.float64)


def fit_histogram_binning(probs: np.ndarray, labels: np.ndarray, n_bins: int = 20) -> np.ndarray:
    """Per-class bin values ``theta`` (K, n_bins) of one-vs-rest histogram binning.

    ``theta[j, m]`` = fraction of ``labels == j`` among the samples whose ``probs[:, j]`` lies in
    bin ``m``; an empty bin gets its centre ``(m + 0.5) / n_bins``.

    Cost: one comparison pass over ``probs`` (:func:`entries_above_first_bin`); bin 0's count of
    class ``j`` is ``N`` minus its other bins, and positives are the ``N`` entries ``(i, y_i)``.
    """
    probs = _as_c_float64(probs)
    labels = np.asarray(labels, dtype=np.intp)
    n, k = probs.shape
    flat, ids = entries_above_first_bin(probs, n_bins)
    counts = np.bincount((flat % k) * n_bins + ids, minlength=k * n_bins).reshape(k, n_bins)
    counts[:, 0] = n - counts[:, 1:].sum(axis=1)
    true_ids = equal_width_bin_index(probs[np.arange(n), labels], n_bins)
    positives = np.bincount(labels * n_bins + true_ids, minlength=k * n_bins).reshape(k, n_bins)
    centres = (np.arange(n_bins) + 0.5) / n_bins
    theta = np.broadcast_to(centres, (k, n_bins)).copy()
    filled = counts > 0
    theta[filled] = positives[filled] / counts[filled]
    return theta


def apply_histogram_binning(
    theta: np.ndarray,
    probs: np.ndarray,
    out: np.ndarray | None = None,
    renormalise: bool = False,
) -> np.ndarray:
    """Replace each ``probs[i, j]`` by ``theta[j, bin]``; with ``renormalise=True`` also divide
    each row by its sum (:func:`renormalise_rows`, same result bit for bit).

    The output starts as every class's bin-0 value; only the entries outside bin 0
    (:func:`entries_above_first_bin`) are looked up.  Filling, lookup and renormalisation run in
    row blocks of about ``_BLOCK_ENTRIES`` entries, so each block is still in cache for the next
    step.  ``out`` (a C-contiguous float64 array of ``probs``' shape, which may be ``probs``
    itself) receives the result instead of a new array.
    """
    probs = _as_c_float64(probs)
    n, k = probs.shape
    n_bins = theta.shape[1]
    if out is None:
        out = np.empty(probs.shape, dtype=np.float64)
    elif out.shape != probs.shape or out.dtype != np.float64 or not out.flags.c_contiguous:
        raise ValueError(
            f"out must be a C-contiguous float64 array of shape {probs.shape}; "
            "pass out=None to get a new array"
        )
    flat, ids = entries_above_first_bin(probs, n_bins)  # before out is written (out may be probs)
    vals = theta.reshape(-1)[(flat % k) * n_bins + ids]
    step = max(1, _BLOCK_ENTRIES // k)
    starts = np.arange(0, n, step)
    cuts = np.searchsorted(flat, np.append(starts, n) * k)
    out_flat = out.reshape(-1)
    first = np.asarray(theta[:, 0], dtype=np.float64)
    for b, r0 in enumerate(starts):
        block = out[r0 : r0 + step]
        block[...] = first
        lo, hi = cuts[b], cuts[b + 1]
        out_flat[flat[lo:hi]] = vals[lo:hi]
        if renormalise:
            renormalise_rows(block)
    return out


@register
class HistogramBinning(Calibrator):
    """One-vs-rest histogram binning with renormalised rows (see module docstring).

    ``precision="float32"`` bins the study's float32 softmax probabilities (the output stays
    float64, as in the study; see :mod:`calbench.calibrators.precision`).
    """

    name = "hist"
    reference = "Zadrozny & Elkan 2001 (histogram binning)"

    state_schema = {"theta": Field(shape=("K", None), low=0.0, high=1.0, note="bin frequencies")}

    def _check_state_params(self, state: dict[str, Any], k: int) -> str | None:
        n_bins = self._params["n_bins"]
        if state["theta"].shape[1] != n_bins:
            return f"theta has {state['theta'].shape[1]} bins per class but n_bins = {n_bins}"
        return None

    def __init__(self, *, n_bins: int = 20, precision: str = "float64") -> None:
        super().__init__(n_bins=check_n_bins(n_bins), precision=check_precision(precision))
        self.theta_: np.ndarray | None = None

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        probs = softmax_in(logits, self._params["precision"])
        self.theta_ = fit_histogram_binning(probs, labels, self._params["n_bins"])

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        probs = softmax_in(logits, self._params["precision"])  # a new array
        out = probs if probs.dtype == np.float64 else None  # float64: calibrated in place
        return apply_histogram_binning(self.theta_, probs, out=out, renormalise=True)

    def _get_state(self) -> dict[str, Any]:
        return {"theta": self.theta_}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.theta_ = np.asarray(state["theta"], dtype=np.float64)


# ------------------------------------------------------------------------------------------------
# BBQ


def bbq_bin_counts(n: int, c: float = 10.0) -> np.ndarray:
    """Numbers of bins ``B`` in BBQ's model space for ``n`` samples (Naeini et al. 2015)."""
    root = n ** (1.0 / 3.0)
    lo = min(n, max(1, int(np.floor(root / c))))
    hi = min(n, max(lo, int(np.ceil(c * root))))
    return np.arange(lo, hi + 1)


def beta_posterior_mean(m: np.ndarray, n: np.ndarray, alpha: np.ndarray, beta: np.ndarray):
    """Posterior mean ``(m + alpha) / (n + alpha + beta)`` of a Beta(alpha, beta)-binomial bin."""
    return (m + alpha) / (n + alpha + beta)


def bdeu_log_score(m, n, midpoints, ess: float = 2.0):
    """log BDeu marginal likelihood of one binning (Naeini et al. 2015, eq. 3; see module doc):
    a float for one binning (1-D arrays of its bins), one per row for a stack of binnings with
    the same number of bins (2-D arrays, bins along the last axis)."""
    from scipy.special import gammaln

    m = np.asarray(m, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    b = m.shape[-1]
    a = ess / b * np.asarray(midpoints, dtype=np.float64)
    bb = ess / b - a
    terms = (
        gammaln(ess / b)
        - gammaln(n + ess / b)
        + gammaln(m + a)
        - gammaln(a)
        + gammaln(n - m + bb)
        - gammaln(bb)
    )
    # C order: each row's sum in the same (pairwise) order as a 1-D sum of it
    out = np.ascontiguousarray(terms).sum(axis=-1)
    return float(out) if m.ndim == 1 else out


#: scores per block of columns in :func:`fit_bbq_columns` (the block's arrays are a few times this)
BBQ_BLOCK = 1 << 21


def fit_bbq_columns(
    scores: np.ndarray,
    targets: np.ndarray,
    *,
    c: float = 10.0,
    ess: float = 2.0,
    bin_counts=None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Model-averaged BBQ map of each column of ``scores`` (N, P) against ``targets`` (N, P),
    each as a step function ``(breaks, values)``: a score ``x`` maps to
    ``values[searchsorted(breaks, x, side="right")]`` (``len(values) == len(breaks) + 1``).

    ``bin_counts`` overrides the model space (default :func:`bbq_bin_counts`).  The columns
    share the sample count, hence every model's bin boundaries (sample positions), so each
    model is scored for all columns at once.  A column's breaks are the distinct midpoints
    between consecutive sorted scores at the union ``U`` of the models' boundary positions,
    non-decreasing along ``U``; a model's bin for the break at position ``r`` of ``U`` is the
    number of its boundaries at positions ``<= r``, the same for every column.  Columns go
    through in blocks of about ``BBQ_BLOCK`` scores (memory ``O(BBQ_BLOCK)``).
    """
    scores, targets = np.asarray(scores), np.asarray(targets)
    step = max(1, BBQ_BLOCK // max(1, scores.shape[0]))
    out = []
    for lo in range(0, scores.shape[1], step):
        block = slice(lo, lo + step)
        out += _fit_bbq_block(scores[:, block], targets[:, block], c, ess, bin_counts)
    return out


def _fit_bbq_block(scores, targets, c, ess, bin_counts) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`fit_bbq_columns` of one block of columns, all at once."""
    order = np.argsort(scores, axis=0, kind="stable").T
    s = np.take_along_axis(np.asarray(scores, dtype=np.float64).T, order, axis=1)
    t = np.take_along_axis(np.asarray(targets, dtype=np.float64).T, order, axis=1)
    p, n = s.shape
    cum = np.concatenate([np.zeros((p, 1)), np.cumsum(t, axis=1)], axis=1)
    models = []
    for n_bins in bbq_bin_counts(n, c) if bin_counts is None else bin_counts:
        starts = np.unique(np.round(np.arange(n_bins) * n / n_bins).astype(np.int64))
        ends = np.append(starts[1:], n)
        inner = 0.5 * (s[:, starts[1:] - 1] + s[:, starts[1:]])  # boundaries between bins
        edges = np.concatenate([np.zeros((p, 1)), inner, np.ones((p, 1))], axis=1)
        mid = np.clip(0.5 * (edges[:, :-1] + edges[:, 1:]), 1e-12, 1 - 1e-12)
        counts = (ends - starts).astype(np.float64)
        pos = cum[:, ends] - cum[:, starts]
        models.append((starts[1:], counts, pos, mid, bdeu_log_score(pos, counts, mid, ess)))
    log_scores = np.stack([mod[-1] for mod in models], axis=1)  # (P, models), C order
    weights = np.ascontiguousarray(np.exp(log_scores - log_scores.max(axis=1, keepdims=True)))
    weights /= weights.sum(axis=1, keepdims=True)
    union = np.unique(np.concatenate([mod[0] for mod in models]))
    # value below every break (column 0) and at each position of the union (columns 1..)
    values = np.zeros((p, union.size + 1))
    term = np.empty_like(values)
    for q, (bounds, counts, pos, mid, _) in enumerate(models):
        b = bounds.size + 1
        a = ess / b * mid
        theta = beta_posterior_mean(pos, counts, a, ess / b - a)
        member = np.zeros(union.size, dtype=np.int64)
        member[np.searchsorted(union, bounds)] = 1
        np.take(theta, np.concatenate([[0], np.cumsum(member)]), axis=1, out=term)
        values += np.multiply(weights[:, q : q + 1], term, out=term)
    mids = 0.5 * (s[:, union - 1] + s[:, union])  # (P, |U|), non-decreasing along each row
    out = []
    for j in range(p):
        breaks = np.unique(mids[j])
        at = np.searchsorted(mids[j], breaks, side="right")  # 1 + last position of each break
        out.append((breaks, values[j, np.concatenate([[0], at])]))
    return out


def fit_bbq_column(
    scores: np.ndarray, targets: np.ndarray, **kwargs
) -> tuple[np.ndarray, np.ndarray]:
    """Model-averaged BBQ map of one binary problem: :func:`fit_bbq_columns` of one column."""
    return fit_bbq_columns(np.asarray(scores)[:, None], np.asarray(targets)[:, None], **kwargs)[0]


@register
class BBQ(Calibrator):
    """Bayesian Binning into Quantiles, one-vs-rest, renormalised (see module docstring).

    ``precision="float32"``: float32 softmax input and float32 output
    (:mod:`calbench.calibrators.precision`).
    """

    name = "bbq"
    reference = "Naeini, Cooper & Hauskrecht 2015 (Bayesian binning into quantiles)"

    state_schema = {
        "breaks": Field(ragged=True, low=0.0, high=1.0, note="per-class bin edges"),
        "values": Field(ragged=True, low=0.0, high=1.0, note="per-class calibrated values"),
    }

    @classmethod
    def _check_state(cls, state: dict[str, Any], k: int) -> str | None:
        for j, (br, val) in enumerate(zip(state["breaks"], state["values"], strict=True)):
            if val.size != br.size + 1:
                return f"class {j} has {br.size} breaks but {val.size} values (breaks + 1)"
            if not rises_within(br, [0, br.size]):
                return f"breaks of class {j} must rise strictly"
        return None

    def __init__(self, *, c: float = 10.0, ess: float = 2.0, precision: str = "float64") -> None:
        for key, val in (("c", c), ("ess", ess)):
            if not (isinstance(val, int | float) and np.isfinite(val) and val > 0):
                raise ValueError(f"{key} must be a finite number > 0, got {val!r}")
        super().__init__(c=float(c), ess=float(ess), precision=check_precision(precision))
        self.breaks_: list[np.ndarray] | None = None
        self.values_: list[np.ndarray] | None = None

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        probs = softmax_in(logits, self._params["precision"])
        onehot = labels[:, None] == np.arange(probs.shape[1])
        fits = fit_bbq_columns(probs, onehot, c=self._params["c"], ess=self._params["ess"])
        self.breaks_ = [f[0] for f in fits]
        self.values_ = [f[1] for f in fits]

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        probs = softmax_in(logits, self._params["precision"])
        out = np.empty_like(probs)
        for j, (br, val) in enumerate(zip(self.breaks_, self.values_, strict=True)):
            out[:, j] = val[np.searchsorted(br, probs[:, j], side="right")]
        return renormalise_rows(out)

    def _get_state(self) -> dict[str, Any]:
        return {"breaks": list(self.breaks_), "values": list(self.values_)}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.breaks_ = [np.asarray(b, dtype=np.float64) for b in state["breaks"]]
        self.values_ = [np.asarray(v, dtype=np.float64) for v in state["values"]]
