"""Calibration metrics on probabilities ``(N, K)`` and integer labels ``(N,)``; fractions, not
percent.

``METRICS`` maps the names the workflow reports to callables ``f(probs, labels) -> float`` with
the study's defaults (Vasilev, MSU 2021: 15 equal-width bins, NLL with scikit-learn <= 1.0
clipping) and the seed papers' extra metrics. Each entry is a :class:`Metric`; most also expose
a per-sample decomposition (``stats`` + ``reduce``) that :mod:`calbench.stats` uses to bootstrap
without re-indexing the ``(N, K)`` array.

Kull et al. 2019's conventions are registered as ``ece_kull``, ``mce_kull``, ``cwece_kull`` (sum
over classes, their per-class binning), ``brier_kull`` (divided by K) and ``nll_kull``
(:mod:`calbench.metrics.kull`). The unbiased squared calibration errors ``ece_ub``,
``ece_ub_mass`` and ``cwece_ub`` (:mod:`calbench.metrics.unbiased`) carry the registry's
``jackknife`` interval and ``jackknife_z`` test.

The facts of an entry are :class:`calbench.metrics.registry.Metric`; the per-sample, bootstrap
and sign-flip forms of the entries live in :mod:`calbench.metrics.forms`, the entries beyond the
study's table in :mod:`calbench.metrics.entries`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial

from calbench._checks import check_probs_labels
from calbench.metrics.binning import (
    DIAGRAM_BINS,
    ECE_BINS,
    ReliabilityBins,
    reliability_bins,
    top_label,
)
from calbench.metrics.ece import (
    adaptive_ece,
    calibration_error_1d,
    classwise_ece,
    classwise_sums,
    debiased_ece,
    debiased_from_values,
    ece,
    ks_error,
    ks_from_values,
    marginal_ce,
    mce,
)
from calbench.metrics.entries import (
    _CLASSWISE,
    _ERROR,
    _MAX_GAP,
    _SCORE_MEAN,
    _TOP_LABEL,
    _UNVERIFIED,
    _plain_metrics,
    _ub_metrics,
)
from calbench.metrics.forms import (
    _brier_kull_stats,
    _correct,
    _cwece_core,
    _cwece_kull_core,
    _cwece_kull_linear,
    _cwece_kull_weighted,
    _cwece_linear,
    _cwece_weighted,
    _dece_stats,
    _kull_linear,
    _kull_weighted,
    _marginal_core,
    _marginal_linear,
    _marginal_weighted,
    _mean,
    _top,
    _width_linear,
    _width_weighted,
)
from calbench.metrics.kull import (
    cwece_kull,
    ece_kull,
    ece_kull_from_values,
    mce_kull,
    mce_kull_from_values,
)
from calbench.metrics.registry import INTERVALS, MISSING, PAIRED_TESTS, Metric, _decomposed
from calbench.metrics.scoring import accuracy, brier, brier_per_sample, nll, nll_per_sample
from calbench.metrics.smooth import smooth_ece_from_values
from calbench.metrics.soft import (
    dece,
    dece_from_values,
    dece_torch,
    sb_ece,
    sb_ece_from_values,
    sb_ece_torch,
)
from calbench.metrics.sweep import ece_sweep, ece_sweep_from_values

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


#: Interval constructions a metric may name (:mod:`calbench.stats`): ``"percentile"`` (Davison
#: & Hinkley 1997, eq. 5.18), ``"basic"`` (eq. 5.6; Kumar, Liang & Ma 2019) and ``"upper"`` (the


METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        _decomposed(
            "accuracy",
            _correct,
            _mean,
            is_mean=True,
            display="Accuracy, %",
            scale=100.0,
            decimals=2,
            higher_is_better=True,
            interval="percentile",
            paired_test="mcnemar_exact",
            verdicts=True,
            reference="top-1 accuracy; paired test of McNemar 1947 (Dietterich 1998)",
        ),
        _decomposed(
            "ece",
            _top,
            partial(calibration_error_1d, n_bins=ECE_BINS, norm="l1"),
            weighted=_width_weighted("l1"),
            linear=_width_linear("l1"),
            display="ECE, % (15 bins)",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_TOP_LABEL,
            reference="Naeini, Cooper & Hauskrecht 2015; Guo et al. 2017, eq. 3",
            **_ERROR,
        ),
        _decomposed(
            "mce",
            _top,
            partial(calibration_error_1d, n_bins=ECE_BINS, norm="max"),
            weighted=_width_weighted("max"),
            linear=_width_linear("max"),
            display="MCE, % (15 bins)",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_MAX_GAP,
            reference="Naeini, Cooper & Hauskrecht 2015; Guo et al. 2017, eq. 4",
            **_ERROR,
        ),
        Metric(
            "cwece",
            _cwece_core,
            weighted=_cwece_weighted,
            linear=_cwece_linear,
            display="Classwise ECE, % (15 bins)",
            scale=100.0,
            decimals=3,
            interval=None,
            no_interval_reason=_CLASSWISE,
            reference="Kull et al. 2019, eq. 8 (classwise ECE, mean over classes)",
            **_ERROR,
        ),
        _decomposed(
            "ace",
            _top,
            partial(calibration_error_1d, n_bins=ECE_BINS, binning="mass"),
            display="Adaptive ECE, % (15 equal-mass bins)",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Nixon, Dusenberry, Zhang, Jerfel & Tran 2019 (adaptive calibration error)",
            **_ERROR,
        ),
        _decomposed(
            "ece_l2_mass",
            _top,
            partial(calibration_error_1d, n_bins=ECE_BINS, norm="l2", binning="mass"),
            display="L2 ECE, % (equal-mass bins)",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Kumar, Liang & Ma 2019, sec. 2 (l2 calibration error)",
            **_ERROR,
        ),
        _decomposed(
            "nll",
            lambda p, y, dtype=None: (nll_per_sample(p, y, "study"),),
            _mean,
            is_mean=True,
            display="NLL",
            scale=1.0,
            decimals=3,
            reference="negative log-likelihood, Guo et al. 2017, sec. 2 (scikit-learn <= 1.0 clip)",
            **_SCORE_MEAN,
        ),
        _decomposed(
            "nll_modern",
            lambda p, y, dtype=None: (nll_per_sample(p, y, "modern", dtype),),
            _mean,
            is_mean=True,
            display="NLL (unclipped)",
            scale=1.0,
            decimals=3,
            reference="negative log-likelihood, Guo et al. 2017, sec. 2 (machine-epsilon clip)",
            **_SCORE_MEAN,
        ),
        _decomposed(
            "brier",
            lambda p, y, dtype=None: (brier_per_sample(p, y),),
            _mean,
            is_mean=True,
            display="Brier score",
            scale=1.0,
            decimals=3,
            reference="Brier 1950 (sum over classes)",
            **_SCORE_MEAN,
        ),
        _decomposed(
            "ks",
            _top,
            ks_from_values,
            display="KS error, %",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Gupta, Rahimi, Ajanthan, Mensink, Sminchisescu & Hartley 2021, eq. 7",
            **_ERROR,
        ),
        _decomposed(
            "sbece",
            _top,
            sb_ece_from_values,
            display="SB-ECE, %",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Karandikar, Cain, Tran, Lakshminarayanan, Shlens, Mozer & Roelofs 2021",
            **_ERROR,
        ),
        _decomposed(
            "dece",
            _dece_stats,
            dece_from_values,
            display="DECE, %",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Bohdal, Yang & Hospedales 2021 (differentiable ECE)",
            **_ERROR,
        ),
        _decomposed(
            "debiased_ece",
            _top,
            partial(debiased_from_values, n_bins=ECE_BINS),
            display="Debiased ECE, %",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Kumar, Liang & Ma 2019, Theorem 5.4 (debiased l2 error)",
            **_ERROR,
        ),
        Metric(
            "marginal_ce",
            _marginal_core,
            weighted=_marginal_weighted,
            linear=_marginal_linear,
            display="Marginal CE, %",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_CLASSWISE,
            reference="Kumar, Liang & Ma 2019, sec. 2 (marginal l2 calibration error)",
            **_ERROR,
        ),
        _decomposed(
            "ece_sweep",
            _top,
            ece_sweep_from_values,
            display="Mean-sweep CE, % (l2, equal-mass)",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Roelofs, Cain, Shlens & Mozer 2022, sec. 4 (ECE_sweep)",
            **_ERROR,
        ),
        _decomposed(
            "smece",
            _top,
            smooth_ece_from_values,
            display="Smooth ECE, %",
            scale=100.0,
            decimals=2,
            interval=None,
            no_interval_reason=_UNVERIFIED,
            reference="Blasiok & Nakkiran 2023 (smooth ECE, reflected Gaussian kernel)",
            **_ERROR,
        ),
        # unbiased squared calibration errors (calbench.metrics.unbiased)
        *_ub_metrics(),
        # Kull et al. 2019's conventions (calbench.metrics.kull)
        _decomposed(
            "ece_kull",
            _top,
            ece_kull_from_values,
            weighted=_kull_weighted("l1"),
            linear=_kull_linear("l1"),
            display="ECE (Kull et al. bins)",
            scale=1.0,
            decimals=4,
            interval=None,
            no_interval_reason=_TOP_LABEL,
            reference="Kull et al. 2019, supplementary (their (lo, hi] bins)",
            **_ERROR,
        ),
        _decomposed(
            "mce_kull",
            _top,
            mce_kull_from_values,
            weighted=_kull_weighted("max"),
            linear=_kull_linear("max"),
            display="MCE (Kull et al. bins)",
            scale=1.0,
            decimals=4,
            interval=None,
            no_interval_reason=_MAX_GAP,
            reference="Kull et al. 2019, supplementary (their (lo, hi] bins)",
            **_ERROR,
        ),
        Metric(
            "cwece_kull",
            _cwece_kull_core,
            weighted=_cwece_kull_weighted,
            linear=_cwece_kull_linear,
            display="Classwise ECE (Kull et al., sum over classes)",
            scale=1.0,
            decimals=4,
            interval=None,
            no_interval_reason=_CLASSWISE,
            reference="Kull et al. 2019, eq. 8 (summed over classes, their binning)",
            **_ERROR,
        ),
        _decomposed(
            "brier_kull",
            _brier_kull_stats,
            _mean,
            is_mean=True,
            display="Brier score / K (Kull et al.)",
            scale=1.0,
            decimals=4,
            reference="Brier 1950 divided by K, as Kull et al. 2019 report it",
            **_SCORE_MEAN,
        ),
        _decomposed(
            "nll_kull",
            lambda p, y, dtype=None: (nll_per_sample(p, y, "study"),),
            _mean,
            is_mean=True,
            display="NLL (Kull et al.)",
            scale=1.0,
            decimals=4,
            reference="negative log-likelihood as Kull et al. 2019 report it",
            **_SCORE_MEAN,
        ),
        # calibration / refinement split, selective prediction, conformal sets
        # (calbench.metrics.refinement, .selective, .conformal)
        *_plain_metrics(),
    ]
}

#: Metrics printed multiplied by 100 (``scale == 100``: accuracy and the calibration errors).
STUDY_PERCENT = frozenset(name for name, m in METRICS.items() if m.percent)


def compute_metrics(probs, labels, names: Iterable[str] | None = None) -> dict[str, float]:
    """Evaluate several :data:`METRICS` (all by default) validating the input only once."""
    names = list(METRICS) if names is None else list(names)
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric names {unknown}; choose from {sorted(METRICS)}")
    dtype = getattr(probs, "dtype", None)
    p, y = check_probs_labels(probs, labels)
    return metric_values({n: METRICS[n] for n in names}, p, y, dtype)


def metric_values(metrics: Mapping[str, Metric], p, y, dtype=None) -> dict[str, float]:
    """``{key: metric value}`` of several :class:`Metric` entries on one validated set ``(p, y)``
    (``dtype``: the caller's input dtype, as in ``Metric.core``), each value equal to
    ``metric(probs, labels)``: every per-sample decomposition (``Metric.stats``) and every joint
    computation (``Metric.joint``) runs once for all the metrics sharing it."""
    shared: dict = {}
    out = {}
    for key, m in metrics.items():
        if m.joint is not None:
            if m.joint not in shared:
                shared[m.joint] = m.joint(p, y, dtype)
            out[key] = float(shared[m.joint][m.name])
        elif m.stats is None:
            out[key] = m.core(p, y, dtype)
        else:
            if m.stats not in shared:
                shared[m.stats] = m.stats(p, y, dtype)
            out[key] = float(m.reduce(*shared[m.stats]))
    return out


# keep the helpers importable for plots and calibrators
__all__ += ["classwise_sums", "top_label"]

