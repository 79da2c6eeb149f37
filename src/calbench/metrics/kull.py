"""Kull et al. 2019's metric conventions, for like-for-like comparisons with their tables.

Kull, Perello-Nieto, Kängsepp, Silva Filho, Song, Flach 2019, "Beyond temperature scaling:
Obtaining well-calibrated multiclass probabilities with Dirichlet calibration" (NeurIPS),
Tables 3-4 and supplementary Tables 13-18 were computed by their evaluation code
(dirichletcal/experiments_dnn ``scripts/utility/evaluation.py``), whose conventions differ from
the replicated study's (:mod:`calbench.metrics.ece`):

* **confidence ECE / MCE** (``ece_kull``, ``mce_kull``): 15 bins of width ``w = 1/15`` with
  upper bounds ``u_b = numpy.arange(w, 1 + w, w)`` (floating-point steps, so 15 or 16 bounds),
  bin ``b`` = the confidences ``c`` with ``u_b - w < c <= u_b`` (closed on the right), the bin
  whose lower bound is exactly 0 also holding ``c = 0``; weights ``n_b / N``; MCE is the largest
  ``|acc_b - conf_b|``, empty bins counting 0.  A confidence on a bound shared by two bins whose
  float bounds do not coincide is counted as their loop counts it.
* **classwise ECE** (``cwece_kull``): for each class ``j``, column ``j`` binned by
  ``numpy.digitize(p, linspace(0, 1, 15)) - 1``: 14 bins ``[k/14, (k+1)/14)`` plus a separate
  bin for ``p == 1``; ``CE_j = sum_b (n_b / N) |mean p - mean 1[y = j]|`` over non-empty bins; the
  2019 tables **sum** ``CE_j`` over the K classes (the code took the mean only from 2021-06), so
  ``cwece_kull = K x`` a mean-over-classes value.
* **Brier** (``brier_kull``): ``sum_i sum_k (p_ik - 1[y_i = k])^2 / (N K)``, i.e. the study's
  Brier divided by K.
* **log-loss** (``nll_kull``): ``sklearn.metrics.log_loss`` of 2019, which clips to
  [1e-15, 1 - 1e-15] and renormalises the rows: the same rule as ``nll``, registered under this
  name so that a Kull-convention metric list is complete.

Their loops accumulate in the probabilities' dtype (float32 for softmax of float32 logits);
calbench accumulates in float64, which differs from their printed 6-decimal values by at most a
few units of the last digit.
"""

from __future__ import annotations

import numpy as np

from calbench._checks import check_probs_labels
from calbench.metrics.binning import onevsrest_binner, top_label

#: Bins of every Kull-convention metric (their ``bins = 15``).
KULL_BINS = 15


def kull_confidence_bins(n_bins: int = KULL_BINS) -> tuple[np.ndarray, float]:
    """Upper bounds ``arange(w, 1 + w, w)`` and width ``w = 1 / n_bins`` of their ECE bins."""
    width = 1 / n_bins
    return np.arange(width, 1 + width, width), width


def _confidence_gaps(conf: np.ndarray, correct: np.ndarray, n_bins: int = KULL_BINS):
    """Per-bin ``(|acc_b - conf_b|, n_b)`` of the (lo, hi] confidence bins (module docstring)."""
    upper, width = kull_confidence_bins(n_bins)
    gaps, counts = [], []
    for u in upper:
        lo = u - width
        member = (conf <= u) & ((conf > lo) | (lo == 0))
        n_b = int(np.count_nonzero(member))
        gaps.append(abs(correct[member].mean() - conf[member].mean()) if n_b else 0.0)
        counts.append(n_b)
    return np.array(gaps, dtype=np.float64), np.array(counts, dtype=np.float64)


def ece_kull_from_values(conf: np.ndarray, correct: np.ndarray) -> float:
    """``sum_b |acc_b - conf_b| n_b / N`` over the (lo, hi] bins (validated float64 arrays)."""
    gaps, counts = _confidence_gaps(conf, correct)
    return float(np.sum(gaps * counts) / conf.shape[0])


def mce_kull_from_values(conf: np.ndarray, correct: np.ndarray) -> float:
    """``max_b |acc_b - conf_b|`` over the (lo, hi] bins, empty bins 0."""
    gaps, _ = _confidence_gaps(conf, correct)
    return float(gaps.max())


def ece_kull(probs, labels) -> float:
    """Top-label ECE with Kull et al. 2019's (lo, hi] 15-bin rule (module docstring)."""
    p, y, pred = check_probs_labels(probs, labels, with_argmax=True)
    return ece_kull_from_values(*top_label(p, y, pred))


def mce_kull(probs, labels) -> float:
    """Top-label MCE with Kull et al. 2019's (lo, hi] 15-bin rule (module docstring)."""
    p, y, pred = check_probs_labels(probs, labels, with_argmax=True)
    return mce_kull_from_values(*top_label(p, y, pred))


def kull_class_bin_ids(x: np.ndarray, n_bins: int = KULL_BINS) -> np.ndarray:
    """``numpy.digitize(x, linspace(0, 1, n_bins)) - 1`` for values in [0, 1]: ``n_bins - 1``
    half-open bins and bin ``n_bins - 1`` for exactly 1."""
    return np.searchsorted(np.linspace(0.0, 1.0, n_bins), x, side="right") - 1


def kull_classwise_binner(p: np.ndarray, y: np.ndarray, n_bins: int = KULL_BINS):
    """One-vs-rest bin sums of every class under :func:`kull_class_bin_ids` (validated input).

    Returns ``sums(weights=None) -> (count, sum_p, sum_label)``, each ``(K, n_bins)``;
    ``weights`` are per-sample multiplicities (bootstrap), ``None`` all ones, or an ``(r, N)``
    array of ``r`` resamples giving ``(r, K, n_bins)`` sums
    (:func:`calbench.metrics.binning.onevsrest_binner`).  Entries at or above the first inner
    edge are binned explicitly (at most ``n_bins - 1`` per row); bin 0 of each class is the
    column total minus the other bins.
    """
    first_edge = float(np.linspace(0.0, 1.0, n_bins)[1])
    return onevsrest_binner(p, y, n_bins, lambda v: kull_class_bin_ids(v, n_bins), first_edge)


def cwece_kull_from_sums(count, sum_p, sum_label) -> float:
    """``sum_j sum_b (n_b / N) |mean p - mean label|`` (sum over classes, 2019 convention) from
    sums ``(K, B)`` (a float), or ``(r, K, B)`` sums of ``r`` resamples (an ``(r,)`` array)."""
    safe = np.maximum(count, 1.0)
    gap = np.where(count > 0, np.abs(sum_p / safe - sum_label / safe), 0.0)
    if count.ndim == 2:
        return float(np.sum(count * gap) / count[0].sum())
    return np.sum(count * gap, axis=(-2, -1)) / count[..., 0, :].sum(axis=-1)


def cwece_kull(probs, labels) -> float:
    """Classwise ECE summed over classes with Kull et al.'s per-class binning (module doc)."""
    p, y = check_probs_labels(probs, labels)
    return cwece_kull_from_sums(*kull_classwise_binner(p, y)())
