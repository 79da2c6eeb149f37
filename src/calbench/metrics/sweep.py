"""Monotonic-sweep calibration error (Roelofs et al. 2020, "Mitigating bias in calibration error
estimation", AISTATS 2022, section 4, "ECE_sweep"), the "mean-sweep CE" of Karandikar et al. 2021
(Karandikar et al. 2021, appendix table 4: l2 norm, equal-mass bins).

The top-label confidences are sorted and cut into ``b`` equal-mass bins of contiguous samples
(sizes differ by at most one, the larger bins first, as ``numpy.array_split``). Starting at
``b = 1`` the number of bins grows while the bin accuracies ``acc_1 <= ... <= acc_b`` stay
monotone (non-decreasing in confidence); the chosen ``b*`` is the last monotone count before the
first violation (or ``N``). The error is then the binned calibration error at ``b*``::

    CE_sweep = ( sum_k (n_k / N) |acc_k - conf_k|^p )^(1/p)        (Roelofs et al., eq. 5)

with ``p = 2`` by default (Karandikar et al. 2021) and ``p = 1`` the l1 form.
"""

from __future__ import annotations

import numpy as np

from calbench._checks import check_choice, check_probs_labels
from calbench.metrics.binning import top_label

SWEEP_NORMS = ("l1", "l2")


def _bin_bounds(n: int, b: int) -> np.ndarray:
    """Start offsets (length b + 1) of ``b`` contiguous equal-mass groups of ``n`` samples."""
    q, r = divmod(n, b)
    sizes = np.full(b, q, dtype=np.int64)
    sizes[:r] += 1
    return np.concatenate(([0], np.cumsum(sizes)))


def sweep_n_bins(x: np.ndarray, target: np.ndarray) -> int:
    """The number of equal-mass bins ``b*`` the monotonic sweep selects (validated 1-d arrays).

    ``x``: confidences, ``target``: 0/1 outcomes (same length ``N >= 1``).
    """
    order = np.argsort(x, kind="stable")
    t = np.asarray(target, dtype=np.float64)[order]
    n = t.shape[0]
    cum_t = np.concatenate(([0.0], np.cumsum(t)))
    best = 1
    for b in range(2, n + 1):
        bounds = _bin_bounds(n, b)
        acc = np.diff(cum_t[bounds]) / np.diff(bounds)
        if np.any(np.diff(acc) < 0):
            break
        best = b
    return best


def ece_sweep_from_values(x: np.ndarray, target: np.ndarray, norm: str = "l2") -> float:
    """Monotonic-sweep calibration error of confidences ``x`` against 0/1 ``target``."""
    check_choice(norm, "norm", SWEEP_NORMS)
    x = np.asarray(x, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    n = x.shape[0]
    b = sweep_n_bins(x, target)
    order = np.argsort(x, kind="stable")
    bounds = _bin_bounds(n, b)
    cum_x = np.concatenate(([0.0], np.cumsum(x[order])))
    cum_t = np.concatenate(([0.0], np.cumsum(target[order])))
    count = np.diff(bounds).astype(np.float64)
    gap = np.abs(np.diff(cum_t[bounds]) - np.diff(cum_x[bounds])) / count
    w = count / n
    if norm == "l1":
        return float(np.dot(w, gap))
    return float(np.sqrt(np.dot(w, gap * gap)))


def ece_sweep(probs, labels, norm: str = "l2") -> float:
    """Top-label monotonic-sweep calibration error (Roelofs et al. 2020; Karandikar et al. 2021 table 4).

    ``probs`` (N, K) rows summing to 1, ``labels`` (N,) integer classes; ``norm`` ``"l2"``
    (default, Karandikar et al. 2021) or ``"l1"``. Returns a fraction.
    """
    p, y = check_probs_labels(probs, labels)
    check_choice(norm, "norm", SWEEP_NORMS)
    conf, correct = top_label(p, y)
    return ece_sweep_from_values(conf, correct, norm)
