"""Calibration metrics on probabilities ``(N, K)`` and integer labels ``(N,)``; fractions, not
percent.

``METRICS`` maps the names the workflow reports to callables ``f(probs, labels) -> float`` with
the study's defaults; every entry and its facts are :mod:`calbench.metrics.registry`, the
kernels are the modules beside it (:mod:`~calbench.metrics.ece`, :mod:`~calbench.metrics.kull`,
:mod:`~calbench.metrics.unbiased`, :mod:`~calbench.metrics.caltests`, ...). Most entries also
expose a per-sample decomposition (``stats`` + ``reduce``, :mod:`calbench.metrics.forms`) that
:mod:`calbench.stats` uses to bootstrap without re-indexing the ``(N, K)`` array.

Kull et al. 2019's conventions are registered as ``ece_kull``, ``mce_kull``, ``cwece_kull`` (sum
over classes, their per-class binning), ``brier_kull`` (divided by K) and ``nll_kull``
(:mod:`calbench.metrics.kull`). The unbiased squared calibration errors ``ece_ub``,
``ece_ub_mass`` and ``cwece_ub`` (:mod:`calbench.metrics.unbiased`) carry the registry's
``jackknife`` interval and ``jackknife_z`` test.
"""

from __future__ import annotations

from calbench.metrics.binning import (
    DIAGRAM_BINS,
    ECE_BINS,
    ReliabilityBins,
    reliability_bins,
    top_label,
)
from calbench.metrics.ece import (
    adaptive_ece,
    classwise_ece,
    classwise_sums,
    debiased_ece,
    ece,
    ks_error,
    marginal_ce,
    mce,
)
from calbench.metrics.kull import cwece_kull, ece_kull, mce_kull
from calbench.metrics.registry import (
    INTERVALS,
    METRICS,
    MISSING,
    PAIRED_TESTS,
    STUDY_PERCENT,
    Metric,
    compute_metrics,
    metric_values,
)
from calbench.metrics.scoring import accuracy, brier, nll
from calbench.metrics.soft import dece, dece_torch, sb_ece, sb_ece_torch
from calbench.metrics.sweep import ece_sweep

__all__ = [
    "DIAGRAM_BINS",
    "ECE_BINS",
    "INTERVALS",
    "METRICS",
    "MISSING",
    "PAIRED_TESTS",
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
    "metric_values",
    "nll",
    "reliability_bins",
    "sb_ece",
    "sb_ece_torch",
]

# keep the helpers importable for plots and calibrators
__all__ += ["classwise_sums", "top_label"]
