"""How the registry's metrics are computed beyond ``core``: per-sample decompositions
(``stats``), bootstrap forms (``weighted``: a chunk of resamples from per-sample
multiplicities), sign-flip forms (``linear``: bin sums linear in the per-sample weights), and
the ``core`` / ``joint`` of the whole-set metrics (:func:`plain`, :func:`plain_joint`)."""

from __future__ import annotations

from functools import partial

import numpy as np

from calbench.metrics import unbiased
from calbench.metrics.binning import (
    ECE_BINS,
    fixed_bins_weighted,
    top_label,
    weight_rows,
    weighted_bincounts,
    width_bin_ids,
)
from calbench.metrics.ece import (
    classwise_binner,
    classwise_from_sums,
    classwise_value,
    errors_from_sums,
    marginal_from_sums,
    marginal_value,
)
from calbench.metrics.kull import (
    cwece_kull_from_sums,
    kull_classwise_binner,
    kull_confidence_bins,
)
from calbench.metrics.scoring import brier_per_sample
from calbench.metrics.soft import soft_accuracy


def mean(x: np.ndarray) -> float:
    return float(np.mean(x))


def top(p, y, dtype=None):
    return top_label(p, y)


def correct(p, y, dtype=None):
    return ((np.argmax(p, axis=1) == y).astype(np.float64),)


def dece_stats(p, y, dtype=None):
    return top_label(p, y)[0], soft_accuracy(p, y, 100.0)


def width_weighted(norm: str, n_bins: int = ECE_BINS):
    """``weighted`` form of the equal-width top-label error ``norm`` (ECE, MCE)."""

    def weighted(p, y, dtype=None):
        conf, correct = top_label(p, y)
        reduce = partial(errors_from_sums, norm=norm)
        return fixed_bins_weighted(
            width_bin_ids(conf, n_bins), conf, correct, n_bins, reduce, conf.shape[0]
        )

    return weighted


def _fixed_sums(ids, x, target, size: int, n: int, rows=None):
    """``sums(weights)`` of a top-label error with fixed bins: ``(count, sum_x, sum_t, total)``
    with a leading axis of one row per weight vector (``None``: all ones, one row); linear in
    the weights (``Metric.linear``)."""

    binned = weighted_bincounts([(ids, rows, None), (ids, rows, x), (ids, rows, target)], size, n)

    def sums(weights=None):
        w, _ = weight_rows(np.ones(n) if weights is None else weights, n)
        return (*binned(w), w.sum(axis=1))

    return sums


def width_linear(norm: str, n_bins: int = ECE_BINS):
    """``linear`` form of the equal-width top-label error ``norm`` (ECE, MCE)."""

    def linear(p, y, dtype=None):
        conf, correct = top_label(p, y)
        ids = width_bin_ids(conf, n_bins)
        sums = _fixed_sums(ids, conf, correct, n_bins, conf.shape[0])
        return sums, partial(errors_from_sums, norm=norm)

    return linear


def _kull_reduce(count, sum_x, sum_t, total, norm):
    safe = np.maximum(count, 1.0)
    gap = np.where(count > 0, np.abs(sum_t / safe - sum_x / safe), 0.0)
    if norm == "max":
        return gap.max(axis=-1)
    return np.sum(gap * count, axis=-1) / total


def kull_weighted(norm: str):
    """``weighted`` form of Kull et al.'s (lo, hi] top-label ECE / MCE: the membership of every
    bin is fixed by the confidences (a confidence on a float bound may be in two bins or none,
    as in :func:`calbench.metrics.kull._confidence_gaps`)."""

    def weighted(p, y, dtype=None):
        conf, correct = top_label(p, y)
        rows_a, ids_a, n_bins = _kull_members(conf)
        reduce = partial(_kull_reduce, norm=norm)
        return fixed_bins_weighted(
            ids_a, conf[rows_a], correct[rows_a], n_bins, reduce, conf.shape[0], rows_a
        )

    return weighted


def _kull_members(conf):
    """``(rows, bin ids, number of bins)`` of Kull et al.'s ``(lo, hi]`` confidence bins: every
    sample in each bin it belongs to (a confidence on a float bound may be in two or none)."""
    upper, width = kull_confidence_bins()
    rows, ids = [], []
    for b, u in enumerate(upper):
        lo = u - width
        member = np.flatnonzero((conf <= u) & ((conf > lo) | (lo == 0)))
        rows.append(member)
        ids.append(np.full(member.shape[0], b, dtype=np.int64))
    return np.concatenate(rows), np.concatenate(ids), len(upper)


def kull_linear(norm: str):
    """``linear`` form of Kull et al.'s (lo, hi] top-label ECE / MCE."""

    def linear(p, y, dtype=None):
        conf, correct = top_label(p, y)
        rows_a, ids_a, n_bins = _kull_members(conf)
        sums = _fixed_sums(ids_a, conf[rows_a], correct[rows_a], n_bins, conf.shape[0], rows_a)
        return sums, partial(_kull_reduce, norm=norm)

    return linear


def cwece_weighted(p, y, dtype=None):
    sums = classwise_binner(p, y, ECE_BINS)
    return lambda weights=None: classwise_from_sums(*sums(weights))


def marginal_weighted(p, y, dtype=None):
    sums = classwise_binner(p, y, ECE_BINS)
    return lambda weights=None: marginal_from_sums(*sums(weights), 2.0)


def cwece_core(p, y, dtype=None):
    return classwise_value(p, y, ECE_BINS)


def marginal_core(p, y, dtype=None):
    return marginal_value(p, y, 15, 2.0)


def cwece_kull_core(p, y, dtype=None):
    return cwece_kull_from_sums(*kull_classwise_binner(p, y)())


def cwece_kull_weighted(p, y, dtype=None):
    sums = kull_classwise_binner(p, y)
    return lambda weights=None: cwece_kull_from_sums(*sums(weights))


def brier_kull_stats(p, y, dtype=None):
    return (brier_per_sample(p, y) / p.shape[1],)


def cwece_linear(p, y, dtype=None):
    return classwise_binner(p, y, ECE_BINS), classwise_from_sums


def marginal_linear(p, y, dtype=None):
    return classwise_binner(p, y, ECE_BINS), partial(marginal_from_sums, power=2.0)


def cwece_kull_linear(p, y, dtype=None):
    return kull_classwise_binner(p, y), cwece_kull_from_sums


def plain(fn):
    """``core`` of a metric computed by a function of validated ``(probs, labels)``."""

    def core(p, y, dtype=None):
        return float(fn(p, y))

    return core


def plain_joint(fn):
    """``joint`` of metrics computed together by a function of validated ``(probs, labels)``."""

    def joint(p, y, dtype=None):
        return fn(p, y)

    return joint


def cw_bins(p) -> int:
    """Bins per class of ``cwece_ub``: 15, fewer when thin (:func:`unbiased.classwise_bins`)."""
    return unbiased.classwise_bins(p.shape[0], p.shape[1], ECE_BINS)


def root_weighted(g):
    """``weighted`` form reporting ``sqrt(max(T, 0))`` of a ``weighted`` form of ``T``."""

    def h(weights=None):
        out = unbiased.root(g(weights))
        return float(out) if np.ndim(out) == 0 else out

    return h
