"""Confidence binning shared by the binned calibration metrics and the reliability diagrams.

Two bin schemes are provided.

``"width"`` -- the Vasilev (MSU 2021) study's equal-width bins (its ``calib/utils.py``, used for
ECE, MCE and cwECE, eq. 7-8 of the study): edges ``linspace(0, 1, M + 1)``, bins half-open on the
right, ``[a, b)``, so a value equal to an inner edge goes to the upper bin; a value of exactly 0 is
in bin 0 and a value of exactly 1 is in the last bin (the study moves the last edge to
``1 + 1e-10``; clipping the bin index to ``M - 1`` is the same thing).

``"mass"`` -- equal-mass (quantile) bins as defined by Kumar, Liang & Ma (2019, "Verified
uncertainty calibration", the ``get_equal_bins`` rule of their ``uncertainty-calibration``
package), used for the adaptive ECE (Nguyen & O'Connor 2015; Mukhoti et al. 2020) and the
equal-mass l2 ECE of Karandikar et al. (2021):

1. sort the N values; if ``M > N`` use ``M = N`` bins;
2. cut the sorted values into M consecutive groups whose sizes differ by at most one, the first
   ``N mod M`` groups holding one value more (``numpy.array_split``);
3. the upper boundary of group i (i < M) is the midpoint between its largest value and the
   smallest value of group i + 1; the last upper boundary is 1.0; equal boundaries are merged;
4. a value goes to the first bin whose upper boundary is >= the value (bins closed on the right,
   ``(a, b]``).

Ties therefore never straddle two bins: when a run of equal values crosses a group boundary, the
boundary equals that value and the whole run goes to the lower bin; merged boundaries leave fewer
than M bins (never an empty one). The lower edge of the first mass bin is reported as 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calbench._checks import check_choice, check_n_bins, check_probs_labels

BINNINGS = ("width", "mass")
#: Equal-width bins of the ECE (and of every binned error) the tables print: 15, as in Guo et al.
#: 2017 (section 5) and the coursework (Vasilev 2021, section 2.3).
ECE_BINS = 15
#: Bins of the reliability diagrams: 10, as in the coursework's fig. 1 (the figures' ECE in the
#: corner uses these bins too, so it is not the tables' number).
DIAGRAM_BINS = 10


def width_edges(n_bins: int) -> np.ndarray:
    """Equal-width bin edges ``linspace(0, 1, n_bins + 1)`` (the study's grid)."""
    return np.linspace(0.0, 1.0, check_n_bins(n_bins) + 1)


def width_bin_ids(x: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin index in ``[0, n_bins)`` of each value in [0, 1] under the study's ``[a, b)`` bins.

    The index is looked up against the exact float edges of :func:`width_edges` (not
    ``floor(x * M)``, which rounds differently at edges such as 1/15).
    """
    edges = width_edges(n_bins)
    ids = np.searchsorted(edges, x, side="right") - 1
    np.clip(ids, 0, n_bins - 1, out=ids)
    return ids


def mass_upper_edges(x: np.ndarray, n_bins: int) -> np.ndarray:
    """Upper boundaries of the equal-mass bins of ``x`` (steps 1-3 of the module docstring)."""
    n_bins = check_n_bins(n_bins)
    s = np.sort(np.asarray(x, dtype=np.float64), kind="stable")
    n = s.shape[0]
    m = min(n_bins, n)
    q, r = divmod(n, m)
    sizes = np.full(m, q, dtype=np.int64)
    sizes[:r] += 1
    last = np.cumsum(sizes)[:-1] - 1  # index of the last value of groups 0 .. m-2
    upper = (s[last] + s[last + 1]) / 2.0
    return np.unique(np.append(upper, 1.0))


def mass_bin_ids(x: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Bin index of each value for upper boundaries ``upper`` (bins ``(a, b]``, step 4)."""
    return np.searchsorted(upper, x, side="left")


def bin_ids(x: np.ndarray, n_bins: int, binning: str = "width") -> tuple[np.ndarray, np.ndarray]:
    """Return ``(ids, edges)``: the bin of each value and the bin edges (length n_used + 1)."""
    check_choice(binning, "binning", BINNINGS)
    if binning == "width":
        return width_bin_ids(x, n_bins), width_edges(n_bins)
    upper = mass_upper_edges(x, n_bins)
    return mass_bin_ids(x, upper), np.concatenate([[0.0], upper])


def bin_sums(
    ids: np.ndarray, x: np.ndarray, target: np.ndarray, n_bins: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-bin ``(count, sum of x, sum of target)`` with ``np.bincount`` (float64 sums)."""
    count = np.bincount(ids, minlength=n_bins).astype(np.int64)
    # (np.bincount of an empty input returns integers, hence the casts)
    sum_x = np.bincount(ids, weights=x, minlength=n_bins).astype(np.float64, copy=False)
    sum_t = np.bincount(ids, weights=target, minlength=n_bins).astype(np.float64, copy=False)
    return count, sum_x, sum_t


def top_label(
    p: np.ndarray, y: np.ndarray, pred: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Top-label confidence ``max_k p_ik`` and correctness ``1[argmax_k p_ik == y_i]`` (float64).

    ``argmax`` takes the first of tied maxima, as numpy, scikit-learn and netcal do. ``pred``, the
    row argmax, may be passed when already known (``check_probs_labels(..., with_argmax=True)``).
    """
    if pred is None:
        pred = np.argmax(p, axis=1)
    conf = np.asarray(p[np.arange(p.shape[0]), pred], dtype=np.float64)
    correct = (pred == y).astype(np.float64)
    return conf, correct


@dataclass(frozen=True, eq=False)
class ReliabilityBins:
    """Per-bin summary behind a reliability diagram.

    ``edges`` has one more entry than the other arrays. Empty bins have ``confidence = accuracy
    = 0`` and ``count = 0`` (the study's convention). ``accuracy`` is the frequency of the
    target: top-label correctness, or ``1[y == j]`` for a one-vs-rest diagram of class j.
    """

    edges: np.ndarray
    confidence: np.ndarray
    accuracy: np.ndarray
    count: np.ndarray

    @property
    def weight(self) -> np.ndarray:
        """Share of samples in each bin (count / N)."""
        return self.count / max(int(self.count.sum()), 1)


def reliability_from_values(
    x: np.ndarray, target: np.ndarray, n_bins: int = DIAGRAM_BINS, binning: str = "width"
) -> ReliabilityBins:
    """Reliability bins of confidences ``x`` against 0/1 ``target`` (already validated arrays)."""
    ids, edges = bin_ids(x, n_bins, binning)
    n_used = edges.shape[0] - 1
    count, sum_x, sum_t = bin_sums(ids, x, target, n_used)
    safe = np.maximum(count, 1)
    conf = np.where(count > 0, sum_x / safe, 0.0)
    acc = np.where(count > 0, sum_t / safe, 0.0)
    return ReliabilityBins(edges=edges, confidence=conf, accuracy=acc, count=count)


def reliability_bins(
    probs,
    labels,
    n_bins: int = DIAGRAM_BINS,
    binning: str = "width",
    class_index: int | None = None,
) -> ReliabilityBins:
    """Bins of a reliability diagram (Guo et al. 2017, sec. 2; the study's fig. 1 uses 10 bins).

    With ``class_index=None`` the top-label confidence is binned against correctness; with
    ``class_index=j`` column j is binned against ``1[y == j]`` (one-vs-rest diagram, as in the
    study's classwise ECE, eq. 8). ``binning`` is ``"width"`` (study) or ``"mass"``; see the
    module docstring for the exact bin rules.
    """
    p, y, pred = check_probs_labels(probs, labels, with_argmax=True)
    n_bins = check_n_bins(n_bins)
    check_choice(binning, "binning", BINNINGS)
    if class_index is None:
        x, t = top_label(p, y, pred)
    else:
        k = p.shape[1]
        if (
            isinstance(class_index, bool)
            or not isinstance(class_index, int | np.integer)
            or not 0 <= class_index < k
        ):
            raise ValueError(
                f"class_index must be an integer in [0, {k - 1}] or None, got {class_index!r}"
            )
        x = np.ascontiguousarray(p[:, int(class_index)], dtype=np.float64)
        t = (y == class_index).astype(np.float64)
    return reliability_from_values(x, t, n_bins, binning)


# --------------------------------------------------------------------------------------------
# weighted (bootstrap) bin sums: one pass for a whole chunk of resamples
# --------------------------------------------------------------------------------------------
#: Bytes of the float64 buffer :func:`weighted_column_sums` casts float32 probabilities into.
_CAST_BUFFER_BYTES = 1 << 23


def weight_rows(weights, n: int) -> tuple[np.ndarray, bool]:
    """``weights`` as a float64 ``(r, n)`` array of multiplicities and whether it was 2-D.

    A 1-D ``(n,)`` vector (one resample) becomes one row; a 2-D ``(r, n)`` array holds ``r``
    resamples (row ``i`` is ``np.bincount(idx_i, minlength=n)``).
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim not in (1, 2) or w.shape[-1] != n:
        raise ValueError(
            f"weights must have shape ({n},) or (r, {n}) (per-sample multiplicities), "
            f"got shape {w.shape}"
        )
    return (w, True) if w.ndim == 2 else (w[None, :], False)


#: largest ``n x size`` bin matrix :func:`weighted_bincount` builds densely (32 MiB of float64)
_DENSE_BINS_ENTRIES = 2**22
#: :func:`weighted_bincounts` multiplies by a dense bin matrix up to this many columns (the
#: three sums of a top-label error), by a sparse one above (one-vs-rest errors: K x bins)
_DENSE_BINS_COLUMNS = 64


def weighted_bincounts(parts, size: int, n: int):
    """Several :func:`weighted_bincount` sums of the same ``n`` samples from one product.

    ``parts`` is a sequence of ``(keys, rows, values)`` (``rows``/``values`` may be ``None``, as
    in :func:`weighted_bincount`). Returns ``f(weights) -> list`` of one ``(r, size)`` array per
    part for ``(r, n)`` weights. The bin matrix of all parts is built once (dense up to
    :data:`_DENSE_BINS_COLUMNS` columns, else sparse), so each call costs one matrix product:
    the route of a bootstrap or sign-flip test's many chunks.
    """
    total = size * len(parts)
    cols, keys, data = [], [], []
    for j, (k, rows, values) in enumerate(parts):
        m = k.shape[0]
        cols.append(np.arange(m) if rows is None else rows)
        keys.append(k + j * size)
        data.append(np.ones(m) if values is None else np.asarray(values, dtype=np.float64))
    cols, keys, data = np.concatenate(cols), np.concatenate(keys), np.concatenate(data)
    if total <= _DENSE_BINS_COLUMNS:
        dense = np.zeros((n, total), dtype=np.float64)
        np.add.at(dense, (cols, keys), data)

        def f(weights):
            out = weights @ dense
            return [
                np.ascontiguousarray(out[:, j * size : (j + 1) * size]) for j in range(len(parts))
            ]

        return f
    from scipy import sparse

    s = sparse.csr_matrix((data, (keys, cols)), shape=(total, n))

    def f(weights):
        # a C-ordered (n, r) operand: scipy's product is several times slower on a transposed view
        out = (s @ np.ascontiguousarray(weights.T)).T
        return [np.ascontiguousarray(out[:, j * size : (j + 1) * size]) for j in range(len(parts))]

    return f


def weighted_bincount(
    keys: np.ndarray,
    size: int,
    weights: np.ndarray,
    rows: np.ndarray | None = None,
    values: np.ndarray | None = None,
) -> np.ndarray:
    """``out[i, b] = sum over entries e with keys[e] == b of weights[i, rows[e]] * values[e]``.

    ``weights`` is ``(r, n)``; entry ``e`` belongs to sample ``rows[e]`` (``rows=None``: entry
    ``e`` is sample ``e``) and carries ``values[e]`` (``None``: 1). Returns a float64 ``(r, size)``
    array: row ``i`` is ``np.bincount(keys, weights=weights[i, rows] * values, minlength=size)``
    of that resample alone, up to rounding. All rows come from one product ``weights @ D`` with
    ``D[rows[e], keys[e]] += values[e]`` (``n x size``): dense (BLAS) while ``n * size`` is at most
    :data:`_DENSE_BINS_ENTRIES`, else sparse (``S @ weights.T``, one nonzero per entry).
    """
    m = keys.shape[0]
    n = weights.shape[1]
    cols = np.arange(m) if rows is None else rows
    data = np.ones(m) if values is None else np.asarray(values, dtype=np.float64)
    if size <= _DENSE_BINS_COLUMNS and n * size <= _DENSE_BINS_ENTRIES:
        # a dense (n, size) matrix and one BLAS product: several times faster than the sparse
        # product for the few bins of a top-label or 10-class error (same sums up to rounding)
        dense = np.zeros((n, size), dtype=np.float64)
        np.add.at(dense, (cols, keys), data)
        return np.ascontiguousarray(weights @ dense, dtype=np.float64)
    from scipy import sparse

    s = sparse.csr_matrix((data, (keys, cols)), shape=(size, n))
    return np.ascontiguousarray((s @ np.ascontiguousarray(weights.T)).T, dtype=np.float64)


def weighted_column_sums(weights: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``weights @ p`` in float64: ``(r, n) @ (n, K) -> (r, K)``, the column totals of ``r``
    resamples in one matrix product.

    A float32 ``p`` is cast to float64 through a reused buffer of a few thousand rows at a time,
    so no float64 copy of the whole array is made (numpy's ``weights @ p`` would make one per
    call); the blocks' products are summed, which differs from one product by rounding only.
    """
    if p.dtype == np.float64:
        return weights @ p
    n, k = p.shape
    block = max(1, min(n, _CAST_BUFFER_BYTES // (8 * k)))
    buf = np.empty((block, k), dtype=np.float64)
    out = np.zeros((weights.shape[0], k), dtype=np.float64)
    for start in range(0, n, block):
        stop = min(n, start + block)
        np.copyto(buf[: stop - start], p[start:stop])
        out += weights[:, start:stop] @ buf[: stop - start]
    return out


def _lazy(make):
    """``get()`` returning ``make()``, called on the first ``get()`` only."""
    made = []

    def get():
        if not made:
            made.append(make())
        return made[0]

    return get


def onevsrest_binner(p: np.ndarray, y: np.ndarray, n_bins: int, ids, threshold: float):
    """One-vs-rest bin sums of every class (validated input), shared by the classwise metrics.

    ``ids(values) -> bin index`` maps float64 values in [0, 1] to ``[0, n_bins)`` and every value
    below ``threshold`` to bin 0. Returns ``sums(weights=None) -> (count, sum_p, sum_label)``:
    column j binned against ``1[y == j]``. ``weights`` are per-sample multiplicities: ``None``
    (all ones) or ``(n,)`` give ``(K, n_bins)`` arrays, an ``(r, n)`` array of ``r`` resamples
    gives ``(r, K, n_bins)`` arrays (row i equal to the call with ``weights[i]`` up to rounding).

    Only entries >= ``threshold`` (few per row) are binned explicitly; bin 0 of each class is
    the column total minus the other bins, so the cost is a few passes over the array and no
    ``(N, K)`` integer temporaries; a chunk of resamples costs one matrix product
    (:func:`weighted_column_sums`) and three sparse products (:func:`weighted_bincount`).
    """
    n, k = p.shape
    p = np.ascontiguousarray(p)
    flat = np.flatnonzero(p >= threshold) if n_bins > 1 else np.empty(0, np.int64)
    rows = flat // k
    vals = p.reshape(-1)[flat].astype(np.float64)
    key = (flat - rows * k) * n_bins + ids(vals)
    # the label indicator is 1 only at (i, y_i): bin those N entries
    label_key = y * n_bins + ids(p[np.arange(n), y].astype(np.float64))
    size = k * n_bins
    # the bin matrix of the weighted sums is built on the first weighted call: a plain value
    # needs only the bincounts below (and no sparse matrix, nor scipy's import)
    binned = _lazy(
        lambda: weighted_bincounts(
            [(key, rows, None), (key, rows, vals), (label_key, None, None)], size, n
        )
    )

    def sums(weights=None):
        if weights is None:
            count = np.bincount(key, minlength=size).astype(np.float64).reshape(k, n_bins)
            sum_p = np.bincount(key, weights=vals, minlength=size)
            sum_p = sum_p.astype(np.float64, copy=False).reshape(k, n_bins)
            sum_label = np.bincount(label_key, minlength=size).astype(np.float64)
            count[:, 0] = float(n) - count[:, 1:].sum(axis=1)
            sum_p[:, 0] = p.sum(axis=0, dtype=np.float64) - sum_p[:, 1:].sum(axis=1)
            return count, sum_p, sum_label.reshape(k, n_bins)
        w, batched = weight_rows(weights, n)
        r = w.shape[0]
        count, sum_p, sum_label = (a.reshape(r, k, n_bins) for a in binned()(w))
        count[:, :, 0] = w.sum(axis=1)[:, None] - count[:, :, 1:].sum(axis=2)
        sum_p[:, :, 0] = weighted_column_sums(w, p) - sum_p[:, :, 1:].sum(axis=2)
        if batched:
            return count, sum_p, sum_label
        return count[0], sum_p[0], sum_label[0]

    return sums


def fixed_bins_weighted(
    ids: np.ndarray,
    x: np.ndarray,
    target: np.ndarray,
    size: int,
    reduce,
    n_samples: int,
    rows: np.ndarray | None = None,
):
    """Bootstrap form of a binned error whose bin of each sample does not depend on the sample
    set (equal-width or other fixed edges), so all resamples share the bin ids.

    Entry ``e`` (sample ``rows[e]``, or sample ``e`` when ``rows`` is None; a sample may sit in
    several bins or none) lies in bin ``ids[e]`` with confidence ``x[e]`` and target
    ``target[e]``. Returns ``g(weights=None)``: ``reduce(count, sum_x, sum_t, total)`` of the
    weighted bin sums (each ``(..., size)``) and summed multiplicity ``total`` (``(...)``); a
    float for ``None`` (all ones) or ``(n_samples,)`` weights, an ``(r,)`` array for
    ``(r, n_samples)`` weights (:func:`weight_rows`). ``reduce`` must work on leading axes.
    """

    binned = _lazy(
        lambda: weighted_bincounts(
            [(ids, rows, None), (ids, rows, x), (ids, rows, target)], size, n_samples
        )
    )

    def g(weights=None):
        if weights is None:
            count = np.bincount(ids, minlength=size).astype(np.float64)
            sum_x = np.bincount(ids, weights=x, minlength=size).astype(np.float64, copy=False)
            sum_t = np.bincount(ids, weights=target, minlength=size).astype(np.float64, copy=False)
            return float(reduce(count, sum_x, sum_t, np.float64(n_samples)))
        w, batched = weight_rows(weights, n_samples)
        count, sum_x, sum_t = binned()(w)
        out = np.asarray(reduce(count, sum_x, sum_t, w.sum(axis=1)), dtype=np.float64)
        return out if batched else float(out[0])

    return g
