"""Input validation shared by every public function.

Every check raises a one-line :class:`ValueError` that names what is wrong and how to fix it.
Metrics take probabilities, calibrators take logits: passing logits where probabilities belong
is the most common user error in calibration toolkits, so :func:`check_probs` refuses arrays
whose values leave [0, 1] or whose rows do not sum to 1.
"""

from __future__ import annotations

import numpy as np

#: Largest allowed |row sum - 1| for probability arrays (float32 softmax of 1000 classes is ~1e-6).
ROW_SUM_ATOL = 1e-4


def _as_2d_float(x, what: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        raise ValueError(f"{what} must be a numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(
            f"{what} must be a 2-D array of shape (N, K), got shape {arr.shape}; "
            "reshape to (n_samples, n_classes)"
        )
    if arr.shape[0] == 0:
        raise ValueError(f"{what} is empty (shape {arr.shape}); pass at least one sample")
    if arr.shape[1] < 2:
        raise ValueError(f"{what} must have at least 2 classes (columns), got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    return arr


def _all_finite(arr: np.ndarray) -> bool:
    """Whether every entry of a floating 2-D array is finite, without an (N, K) temporary.

    Blocks of rows are summed in float64: a NaN or infinity makes the sum non-finite, and a
    finite sum proves every entry finite. A non-finite sum of finite float64 entries (overflow)
    is settled by ``np.isfinite`` on that block alone.
    """
    n, k = arr.shape
    rows = max(1, _BLOCK_BYTES // (k * arr.itemsize))
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, n, rows):
            blk = arr[start : start + rows]
            if not np.isfinite(blk.sum(dtype=np.float64)) and not np.all(np.isfinite(blk)):
                return False
    return True


def check_logits(logits, name: str = "logits") -> np.ndarray:
    """Return ``logits`` as a finite floating (N, K) array (float32 and float64 kept as they are)."""
    arr = _as_2d_float(logits, name)
    if not _all_finite(arr):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(
            f"{name} contain {bad} NaN or infinite values; fix the model output or drop those rows"
        )
    return arr


#: Rows are scanned in blocks of about this many bytes, so each block is read from memory once
#: and its row sums, minimum and (optionally) argmax are computed from cache.
_BLOCK_BYTES = 1 << 19


def _scan_rows(arr: np.ndarray, want_argmax: bool):
    """Row sums (float64), global minimum and optionally row argmax, in one cache-blocked pass."""
    n, k = arr.shape
    rows = max(1, _BLOCK_BYTES // (k * arr.itemsize))
    sums = np.empty(n, dtype=np.float64)
    pred = np.empty(n, dtype=np.intp) if want_argmax else None
    lo = np.inf
    for start in range(0, n, rows):
        blk = arr[start : start + rows]
        blk.sum(axis=1, dtype=np.float64, out=sums[start : start + rows])
        lo = min(lo, float(blk.min()))
        if want_argmax:
            np.argmax(blk, axis=1, out=pred[start : start + rows])
    return sums, lo, pred


def check_probs(
    probs, name: str = "probs", atol: float = ROW_SUM_ATOL, *, _argmax: list | None = None
) -> np.ndarray:
    """Return ``probs`` as a floating (N, K) array after checking it holds probabilities.

    float32 and float64 inputs are returned as they are (no copy). One cache-blocked pass over
    the data computes the float64 row sums (NaN and infinities propagate into them) and the
    minimum; values above 1 cannot hide, since a row summing to 1 with an entry above 1 has a
    negative entry.
    """
    arr = _as_2d_float(probs, name)
    sums, lo, pred = _scan_rows(arr, _argmax is not None)
    if _argmax is not None:
        _argmax.append(pred)
    if not np.all(np.isfinite(sums)):
        raise ValueError(f"{name} contain NaN or infinite values; pass finite probabilities")
    dev = np.abs(sums - 1.0)
    row = int(np.argmax(dev))
    if lo < 0.0 or (dev[row] > atol and float(arr.max()) > 1.0):
        raise ValueError(
            f"{name} must lie in [0, 1] but range over [{lo:.4g}, {float(arr.max()):.4g}]; "
            "did you pass logits? apply softmax (calbench.softmax) or a calibrator's predict_proba first"
        )
    if dev[row] > atol:
        raise ValueError(
            f"{name} rows must sum to 1 but row {row} sums to {sums[row]:.6g} (tolerance {atol:g}); "
            "normalize rows or apply softmax to logits"
        )
    return arr


def check_labels(labels, n: int, k: int, name: str = "labels") -> np.ndarray:
    """Return ``labels`` as an int64 (N,) array with values in [0, k)."""
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of class indices, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(
            f"{name} has {arr.shape[0]} entries but there are {n} rows of scores; pass one label per row"
        )
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} must be integer class indices, got non-integer floats")
    elif not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be integer class indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if n and (arr.min() < 0 or arr.max() >= k):
        raise ValueError(
            f"{name} must lie in [0, {k - 1}] for {k} classes, got range [{arr.min()}, {arr.max()}]"
        )
    return arr


def check_n_bins(n_bins) -> int:
    """Return ``n_bins`` as a positive int."""
    if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or n_bins < 1:
        raise ValueError(f"n_bins must be an integer >= 1, got {n_bins!r}")
    return int(n_bins)


def check_choice(value, name: str, choices) -> str:
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def check_probs_labels(probs, labels, *, with_argmax: bool = False):
    """Validate a (probabilities, labels) pair, the input of every metric.

    Returns ``(probs, labels)``, or ``(probs, labels, argmax)`` with ``with_argmax=True``: the
    row argmax (first of tied maxima) comes from the validation pass at no extra memory traffic.
    """
    box: list | None = [] if with_argmax else None
    p = check_probs(probs, _argmax=box)
    y = check_labels(labels, p.shape[0], p.shape[1])
    return (p, y, box[0]) if with_argmax else (p, y)


def check_logits_labels(logits, labels) -> tuple[np.ndarray, np.ndarray]:
    """Validate a (logits, labels) pair, the input of every calibrator's ``fit``."""
    z = check_logits(logits)
    y = check_labels(labels, z.shape[0], z.shape[1])
    return z, y
