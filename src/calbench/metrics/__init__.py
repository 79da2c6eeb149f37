"""Calibration metrics on probabilities ``(N, K)`` and integer labels ``(N,)``; fractions, not
percent.

``METRICS`` maps the names the workflow reports to callables ``f(probs, labels) -> float`` with
the study's defaults (Vasilev, MSU 2021: 15 equal-width bins, NLL with scikit-learn <= 1.0
clipping) and the seed papers' extra metrics. Each entry is a :class:`Metric`; most also expose
a per-sample decomposition (``stats`` + ``reduce``) that :mod:`calbench.stats` uses to bootstrap
without re-indexing the ``(N, K)`` array.

Kull et al. 2019's conventions are registered as ``ece_kull``, ``mce_kull``, ``cwece_kull`` (sum
over classes, their per-class binning), ``brier_kull`` (divided by K) and ``nll_kull``
(:mod:`calbench.metrics.kull`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

import numpy as np

from calbench._checks import check_probs_labels
from calbench.metrics.binning import (
    ReliabilityBins,
    fixed_bins_weighted,
    reliability_bins,
    top_label,
    width_bin_ids,
)
from calbench.metrics.ece import (
    adaptive_ece,
    calibration_error_1d,
    classwise_binner,
    classwise_ece,
    classwise_from_sums,
    classwise_sums,
    classwise_value,
    debiased_ece,
    debiased_from_values,
    ece,
    errors_from_sums,
    ks_error,
    ks_from_values,
    marginal_ce,
    marginal_from_sums,
    marginal_value,
    mce,
)
from calbench.metrics.kull import (
    cwece_kull,
    cwece_kull_from_sums,
    ece_kull,
    ece_kull_from_values,
    kull_classwise_binner,
    kull_confidence_bins,
    mce_kull,
    mce_kull_from_values,
)
from calbench.metrics.scoring import accuracy, brier, brier_per_sample, nll, nll_per_sample
from calbench.metrics.smooth import smooth_ece_from_values
from calbench.metrics.soft import (
    dece,
    dece_from_values,
    dece_torch,
    sb_ece,
    sb_ece_from_values,
    sb_ece_torch,
    soft_accuracy,
)
from calbench.metrics.sweep import ece_sweep, ece_sweep_from_values

__all__ = [
    "METRICS",
    "STUDY_PERCENT",
    "Metric",
    "ReliabilityBins",
    "accuracy",
    "adaptive_ece",
    "brier",
    "classwise_ece",
    "compute_metrics",
    "cwece_kull",
    "debiased_ece",
    "dece",
    "dece_torch",
    "ece",
    "ece_kull",
    "ece_sweep",
    "ks_error",
    "marginal_ce",
    "mce",
    "mce_kull",
    "nll",
    "reliability_bins",
    "sb_ece",
    "sb_ece_torch",
]


@dataclass(frozen=True, eq=False)
class Metric:
    """A named metric with the study's defaults.

    ``core(p, y, dtype)`` computes the value from validated arrays (``dtype`` is the caller's
    input dtype, needed only by the modern NLL rule). When ``stats`` is set, the value equals
    ``reduce(*stats(p, y, dtype))`` where every array returned by ``stats`` has one entry per
    sample, so a bootstrap can resample those arrays instead of the ``(N, K)`` input;
    ``is_mean`` marks metrics whose ``reduce`` is a plain mean of a single array.
    ``weighted(p, y, dtype)``, when set, returns ``g(weights)``: the metric with per-sample
    multiplicities. ``weights`` is ``None`` (all ones) or an ``(N,)`` vector (one bootstrap
    resample, ``np.bincount(idx, minlength=N)``), giving a float, or an ``(r, N)`` array of
    ``r`` resamples, giving an ``(r,)`` array whose entry ``i`` equals ``g(weights[i])`` up to
    rounding. :mod:`calbench.stats` evaluates a whole chunk of resamples with one call. It is set
    for the metrics that do not decompose into per-sample arrays (cwECE, the marginal CE) and
    for the top-label metrics whose bins do not depend on the sample set (equal-width ECE and
    MCE, Kull et al.'s ECE and MCE), whose resamples then share the bin ids.
    """

    name: str
    core: Callable[..., float]
    stats: Callable[..., tuple[np.ndarray, ...]] | None = None
    reduce: Callable[..., float] | None = None
    is_mean: bool = False
    percent: bool = False
    weighted: Callable[..., Callable[..., float]] | None = None

    def __call__(self, probs, labels) -> float:
        dtype = getattr(probs, "dtype", None)
        p, y = check_probs_labels(probs, labels)
        return self.core(p, y, dtype)


def _decomposed(
    name: str, stats, reduce, *, is_mean: bool = False, percent: bool = False, weighted=None
) -> Metric:
    def core(p, y, dtype=None):
        return float(reduce(*stats(p, y, dtype)))

    return Metric(name, core, stats, reduce, is_mean, percent, weighted)


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x))


def _top(p, y, dtype=None):
    return top_label(p, y)


def _correct(p, y, dtype=None):
    return ((np.argmax(p, axis=1) == y).astype(np.float64),)


def _dece_stats(p, y, dtype=None):
    return top_label(p, y)[0], soft_accuracy(p, y, 100.0)


def _width_weighted(norm: str, n_bins: int = 15):
    """``weighted`` form of the equal-width top-label error ``norm`` (ECE, MCE)."""

    def weighted(p, y, dtype=None):
        conf, correct = top_label(p, y)
        reduce = partial(errors_from_sums, norm=norm)
        return fixed_bins_weighted(
            width_bin_ids(conf, n_bins), conf, correct, n_bins, reduce, conf.shape[0]
        )

    return weighted


def _kull_reduce(count, sum_x, sum_t, total, norm):
    safe = np.maximum(count, 1.0)
    gap = np.where(count > 0, np.abs(sum_t / safe - sum_x / safe), 0.0)
    if norm == "max":
        return gap.max(axis=-1)
    return np.sum(gap * count, axis=-1) / total


def _kull_weighted(norm: str):
    """``weighted`` form of Kull et al.'s (lo, hi] top-label ECE / MCE: the membership of every
    bin is fixed by the confidences (a confidence on a float bound may be in two bins or none,
    as in :func:`calbench.metrics.kull._confidence_gaps`)."""

    def weighted(p, y, dtype=None):
        conf, correct = top_label(p, y)
        upper, width = kull_confidence_bins()
        rows, ids = [], []
        for b, u in enumerate(upper):
            lo = u - width
            member = np.flatnonzero((conf <= u) & ((conf > lo) | (lo == 0)))
            rows.append(member)
            ids.append(np.full(member.shape[0], b, dtype=np.int64))
        rows_a, ids_a = np.concatenate(rows), np.concatenate(ids)
        reduce = partial(_kull_reduce, norm=norm)
        return fixed_bins_weighted(
            ids_a, conf[rows_a], correct[rows_a], len(upper), reduce, conf.shape[0], rows_a
        )

    return weighted


def _cwece_weighted(p, y, dtype=None):
    sums = classwise_binner(p, y, 15)
    return lambda weights=None: classwise_from_sums(*sums(weights))


def _marginal_weighted(p, y, dtype=None):
    sums = classwise_binner(p, y, 15)
    return lambda weights=None: marginal_from_sums(*sums(weights), 2.0)


def _cwece_core(p, y, dtype=None):
    return classwise_value(p, y, 15)


def _marginal_core(p, y, dtype=None):
    return marginal_value(p, y, 15, 2.0)


def _cwece_kull_core(p, y, dtype=None):
    return cwece_kull_from_sums(*kull_classwise_binner(p, y)())


def _cwece_kull_weighted(p, y, dtype=None):
    sums = kull_classwise_binner(p, y)
    return lambda weights=None: cwece_kull_from_sums(*sums(weights))


def _brier_kull_stats(p, y, dtype=None):
    return (brier_per_sample(p, y) / p.shape[1],)


METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        _decomposed("accuracy", _correct, _mean, is_mean=True, percent=True),
        _decomposed(
            "ece",
            _top,
            partial(calibration_error_1d, n_bins=15, norm="l1"),
            percent=True,
            weighted=_width_weighted("l1"),
        ),
        _decomposed(
            "mce",
            _top,
            partial(calibration_error_1d, n_bins=15, norm="max"),
            percent=True,
            weighted=_width_weighted("max"),
        ),
        Metric("cwece", _cwece_core, percent=True, weighted=_cwece_weighted),
        _decomposed("ace", _top, partial(calibration_error_1d, n_bins=15, binning="mass")),
        _decomposed(
            "ece_l2_mass",
            _top,
            partial(calibration_error_1d, n_bins=15, norm="l2", binning="mass"),
        ),
        _decomposed(
            "nll", lambda p, y, dtype=None: (nll_per_sample(p, y, "study"),), _mean, is_mean=True
        ),
        _decomposed(
            "nll_modern",
            lambda p, y, dtype=None: (nll_per_sample(p, y, "modern", dtype),),
            _mean,
            is_mean=True,
        ),
        _decomposed(
            "brier", lambda p, y, dtype=None: (brier_per_sample(p, y),), _mean, is_mean=True
        ),
        _decomposed("ks", _top, ks_from_values),
        _decomposed("sbece", _top, sb_ece_from_values),
        _decomposed("dece", _dece_stats, dece_from_values),
        _decomposed("debiased_ece", _top, partial(debiased_from_values, n_bins=15)),
        Metric("marginal_ce", _marginal_core, weighted=_marginal_weighted),
        _decomposed("ece_sweep", _top, ece_sweep_from_values),
        _decomposed("smece", _top, smooth_ece_from_values),  # Blasiok & Nakkiran 2023
        # Kull et al. 2019's conventions (calbench.metrics.kull)
        _decomposed("ece_kull", _top, ece_kull_from_values, weighted=_kull_weighted("l1")),
        _decomposed("mce_kull", _top, mce_kull_from_values, weighted=_kull_weighted("max")),
        Metric("cwece_kull", _cwece_kull_core, weighted=_cwece_kull_weighted),
        _decomposed("brier_kull", _brier_kull_stats, _mean, is_mean=True),
        _decomposed(
            "nll_kull", lambda p, y, dtype=None: (nll_per_sample(p, y, "study"),), _mean, is_mean=True
        ),
    ]
}

#: Metrics the study prints multiplied by 100 (ACC, ECE, MCE, cwECE); NLL and Brier are raw.
STUDY_PERCENT = frozenset(name for name, m in METRICS.items() if m.percent)


def compute_metrics(probs, labels, names: Iterable[str] | None = None) -> dict[str, float]:
    """Evaluate several :data:`METRICS` (all by default) validating the input only once."""
    names = list(METRICS) if names is None else list(names)
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric names {unknown}; choose from {sorted(METRICS)}")
    dtype = getattr(probs, "dtype", None)
    p, y = check_probs_labels(probs, labels)
    shared: dict = {}  # per-sample arrays computed once per stats function (e.g. top label)
    out = {}
    for n in names:
        m = METRICS[n]
        if m.stats is None:
            out[n] = m.core(p, y, dtype)
            continue
        if m.stats not in shared:
            shared[m.stats] = m.stats(p, y, dtype)
        out[n] = float(m.reduce(*shared[m.stats]))
    return out


# keep the helpers importable for plots and calibrators
__all__ += ["classwise_sums", "top_label"]
