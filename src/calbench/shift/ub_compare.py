"""Tests of equal unbiased calibration error under dataset shift (``ece_ub``, ``ece_ub_mass``,
``cwece_ub``; :mod:`calbench.metrics.unbiased`).

A severity's statistic of a method is the mean over that severity's corruptions of its
**unclipped** U-statistic ``T_c`` (the squared binned calibration error on corrupted set ``c``),
reported as its root ``sqrt(max(mean_c T_c, 0))``: the root mean squared calibration error over
the corruptions, so the reported difference and the test's statistic have the same sign.

Null: equal mean population squared calibration error of the two methods at that severity,
``mean_c theta_a,c = mean_c theta_b,c``. The corrupted copies of one test image share its label
and content, so the ``C`` corrupted sets are **not** independent samples and their variances
may not be added. The sampling unit is the image: the tuple (label, logits of every corrupted
copy) is drawn i.i.d., and ``D = mean_c (T_a,c - T_b,c)`` is a symmetric function of these
tuples. Its jackknife leaves one *image* out of every corruption and both methods at once
(``D_(-i) = mean_c (T_a,c(-i) - T_b,c(-i))``, from the exact leave-one-out values of each
``T``), which keeps every dependence between corruptions and methods. By Efron & Stein (1981)
the jackknife variance of any symmetric statistic of i.i.d. units is biased upward, never down:
the z-test ``D / se_J`` with a normal reference is conservative where ``D`` is nearly degenerate
(both methods calibrated on every corruption) and about exact where the linear part dominates
(miscalibrated predictors, the rule under shift). perf/bench_shift_ub.py checks type-I error and
power by simulation on corruptions sharing their images (docs/statistics.md).

At severity 0 (one condition, the clean test half) the test is
:func:`calbench.stats.ub_paired_test` (its jackknife variance corrected for the double-counted
degenerate part, with a t reference), the same test as the study's paired comparisons.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from calbench.metrics.unbiased import jackknife_se, root

#: Why a difference of unbiased calibration errors under shift has a p-value but no interval.
NO_UB_INTERVAL_REASON = (
    "the test's null is equal mean squared calibration error over the corruptions (unclipped "
    "U-statistics); the reported difference is of their roots, for which no interval is built"
)


def mean_ub(stats: Sequence) -> float:
    """Unclipped mean ``mean_c T_c`` of :class:`calbench.metrics.unbiased.UStat` values."""
    return float(np.mean([u.t for u in stats]))


def ub_mean_test(a: Sequence, b: Sequence) -> tuple[float, float, float]:
    """``(difference, z, p)``: two-sided test of equal mean squared calibration error of two
    methods over corrupted sets sharing their images; ``a[c]``, ``b[c]`` are the
    :class:`calbench.metrics.unbiased.UStat` of each method on corrupted set ``c`` (same
    images, same order). ``D = mean_c (T_a,c - T_b,c)``, ``se`` the jackknife standard error
    over images (one image left out of every set and both methods), ``z = D / se``,
    ``p = 2 Phi(-|z|)``; ``difference = sqrt(max(mean T_a, 0)) - sqrt(max(mean T_b, 0))``."""
    from scipy.special import ndtr

    if len(a) != len(b) or not a:
        raise ValueError(
            f"need the same >= 1 corrupted sets for both methods, got {len(a)}, {len(b)}"
        )
    n = a[0].loo.shape[0]
    if any(u.loo.shape != (n,) for u in [*a, *b]):
        raise ValueError(
            "every corrupted set must hold the same images (leave-one-out lengths differ)"
        )
    d = mean_ub(a) - mean_ub(b)
    loo = np.mean([ua.loo - ub.loo for ua, ub in zip(a, b, strict=True)], axis=0)
    se = jackknife_se(loo)
    diff = float(root(mean_ub(a)) - root(mean_ub(b)))
    if not se > 0.0:
        z = 0.0 if d == 0 else math.copysign(math.inf, d)
        return diff, z, 1.0 if d == 0 else 0.0
    z = d / se
    return diff, float(z), float(min(1.0, 2.0 * ndtr(-abs(z))))
