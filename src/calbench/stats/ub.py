"""Intervals and paired tests of the unbiased squared calibration errors (``ece_ub``,
``ece_ub_mass``, ``cwece_ub``; :mod:`calbench.metrics.unbiased`), built from the unclipped
U-statistic and its exact leave-one-out values."""

from __future__ import annotations

import math

import numpy as np

from calbench._checks import check_probs_labels
from calbench.metrics.unbiased import jackknife_se, paired_excess, root, score_bounds
from calbench.stats.common import PairedTest, paired_inputs, resolve_metric


def _jackknife_of(metric):
    m = resolve_metric(metric)
    jack = getattr(m, "jackknife", None)
    if jack is None:
        raise ValueError(
            f"metric {getattr(m, 'name', m)!r} has no jackknife form; "
            "use ece_ub, ece_ub_mass or cwece_ub"
        )
    return jack


def ub_jackknife(metric, probs, labels):
    """:class:`calbench.metrics.unbiased.UStat` of an unbiased squared calibration error
    (``Metric.jackknife``): the unclipped estimate ``t``, its ``N`` leave-one-out values ``loo``
    and the variance ``excess`` of the jackknife."""
    jack = _jackknife_of(metric)
    dtype = getattr(probs, "dtype", None)
    p, y = check_probs_labels(probs, labels)
    if p.shape[0] < 3:
        raise ValueError(f"the jackknife needs >= 3 samples, got {p.shape[0]}")
    return jack(p, y, dtype)


def _z(level: float, sided: str) -> float:
    from scipy.special import ndtri

    if isinstance(level, bool) or not isinstance(level, int | float | np.floating):
        raise ValueError(f"level must be a number in (0, 1), e.g. 0.95, got {level!r}")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must lie in (0, 1), e.g. 0.95, got {level!r}")
    return float(ndtri((1.0 + level) / 2.0)) if sided == "two" else float(ndtri(level))


def ub_interval(
    metric, probs, labels, level: float = 0.95, *, ustat=None
) -> tuple[float, float, float]:
    """``(estimate, low, high)`` of an unbiased squared calibration error's root
    ``sqrt(theta)``: the score interval of the **unclipped** U-statistic ``T``
    (:func:`calbench.metrics.unbiased.score_bounds`: the ``theta >= 0`` a two-sided z-test at
    ``1 - level`` does not reject, its null variance the degenerate part plus a linear part
    proportional to ``theta`` from the exact jackknife, Efron & Stein 1981), square-rooted;
    ``estimate = sqrt(max(T, 0))``. The interval is for the population binned error with the
    same bins (Sun, Chaudhari, Barnett & Dobriban 2024 study such intervals); its coverage is
    checked by simulation in perf/bench_coverage.py (docs/statistics.md). Where that check
    failed (the classwise error with fewer than 10 samples per class,
    :func:`calbench.metrics.unbiased.cw_thin_reason`) the bounds are NaN. ``ustat``: the
    :func:`ub_jackknife` of these arguments when the caller has it."""
    z = _z(level, "two")
    u = ub_jackknife(metric, probs, labels) if ustat is None else ustat
    if u.thin:  # too few samples for a verified interval (UStat.thin says why)
        return float(root(u.t)), math.nan, math.nan
    lo, hi = score_bounds(u, z)
    return float(root(u.t)), float(root(lo)), float(root(hi))


def ub_upper_bound(metric, probs, labels, level: float = 0.95) -> float:
    """One-sided upper confidence bound at ``level`` of ``sqrt(theta)`` (the upper score bound
    of :func:`ub_interval` at the one-sided quantile ``z_level``). A calibrator is
    "calibrated within delta" at this level when the bound is below delta (no multiplicity
    adjustment makes that easier). NaN where :func:`ub_interval` gives no interval."""
    z = _z(level, "one")
    u = ub_jackknife(metric, probs, labels)
    if u.thin:
        return math.nan
    return float(root(score_bounds(u, z)[1]))


def ub_paired_test(metric, probs_a, probs_b, labels) -> PairedTest:
    """Two-sided test of equal population squared calibration error of two calibrators on the
    same samples: ``D = T_a - T_b`` (unclipped), ``t = D / se``, p from Student's t with
    ``df = cells - 1`` (the cells of samples sharing a bin of ``a`` and a bin of ``b``; in
    the classwise error one per class, so about normal).

    ``se^2`` is the jackknife variance of ``D`` from the leave-one-out differences
    ``T_a(-i) - T_b(-i)`` (the same sample left out of both: the pairing is kept; Efron & Stein
    1981) less its double count of ``D``'s degenerate part
    (:func:`calbench.metrics.unbiased.paired_excess`), never below half the jackknife variance.
    The plain jackknife with a normal reference rejected 1-2% of the time at alpha = 0.05 when
    both predictors are calibrated (losing power); the corrected variance with a normal
    reference 5.5-7%: when both are calibrated ``D`` is a difference of a few weighted
    ``chi^2_1 - 1`` terms, whose studentized tails the t reference with the cell count's
    degrees of freedom matches. Asymptotic (no resolution floor: ``min_p = 0``); type-I error
    and power in perf/bench_tests.py (docs/statistics.md). ``difference`` is the reported
    ``sqrt(max(T_a, 0)) - sqrt(max(T_b, 0))``, ``statistic`` is ``t``."""
    pa, pb, y = paired_inputs(probs_a, probs_b, labels)
    return ub_paired_result(ub_jackknife(metric, pa, y), ub_jackknife(metric, pb, y))


def ub_paired_result(ua, ub) -> PairedTest:
    """:func:`ub_paired_test` from the two calibrators' :class:`~calbench.metrics.unbiased.UStat`
    (:func:`ub_jackknife` of each on the same samples)."""
    from scipy.special import stdtr

    d = ua.t - ub.t
    vj = jackknife_se(ua.loo - ub.loo) ** 2
    excess, cells = paired_excess(ua, ub)
    se = math.sqrt(max(vj - excess, 0.5 * vj))
    diff = float(root(ua.t) - root(ub.t))
    if not se > 0.0:
        z = 0.0 if d == 0 else math.copysign(math.inf, d)
        return PairedTest(diff, z, 1.0 if d == 0 else 0.0, "jackknife_z", 0.0)
    z = d / se
    p = float(min(1.0, 2.0 * stdtr(max(cells - 1, 1), -abs(z))))
    return PairedTest(diff, float(z), p, "jackknife_z", 0.0)
