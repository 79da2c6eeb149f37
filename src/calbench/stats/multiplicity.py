"""Multiple-testing adjustments of many p-values: Holm's step-down (family-wise error under any
dependence), Benjamini-Hochberg's step-up (false discovery rate), the smallest adjusted
p-value a test of limited resolution can reach, and "calibrated at level alpha?" verdicts over
many calibration tests' p-values (:mod:`calbench.metrics.caltests`).

:func:`calibration_verdicts` turns many p-values into decisions with Holm's step-down
correction (Holm 1979): the p-values of one model's calibrators share that model's test set and
are dependent in an unknown way, and Holm controls the family-wise error at ``alpha`` under
any dependence (Benjamini-Hochberg's FDR control needs positive dependence; it is offered as
``method="bh"``). Every verdict is read on its own in the report, which is what family-wise
control protects. The analytic p-values resolve far below any ``alpha / m``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np

from calbench._checks import check_choice

CORRECTIONS = ("holm", "bh")


def holm(p_values) -> np.ndarray:
    """Holm (1979) step-down adjusted p-values (family-wise error control, any dependence).

    With the ``m`` p-values sorted ascending, ``p_(i)`` becomes
    ``min(1, max_{j <= i} (m - j + 1) p_(j))``; NaNs stay NaN and do not count in ``m``.
    """
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if ok.size == 0:
        return out
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise ValueError("p-values must lie in [0, 1]")
    m = ok.size
    order = ok[np.argsort(p[ok], kind="stable")]
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out[order] = adjusted
    return out


def benjamini_hochberg(p_values) -> np.ndarray:
    """Benjamini & Hochberg (1995) step-up adjusted p-values: with ``m`` p-values sorted
    ascending, ``p_(i) -> min_{j >= i} min(1, m p_(j) / j)``."""
    p = np.asarray(p_values, dtype=np.float64)
    m = p.shape[0]
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    out = np.empty(m)
    out[order] = adjusted
    return out


def min_adjusted_p(min_p: float, family_size: int) -> float:
    """The smallest Holm-adjusted p-value a test with smallest p-value ``min_p`` can reach in a
    family of ``family_size`` tests: ``min(1, m min_p)`` (Holm 1979: the smallest p-value is
    multiplied by ``m``)."""
    return float(min(1.0, family_size * min_p))


# --------------------------------------------------------------------------------------------
# many tests at once
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """One pair's raw and adjusted p-value and whether calibration is kept at level ``alpha``
    (``calibrated``: the adjusted p-value exceeds ``alpha``, i.e. the test does not reject)."""

    p_value: float
    adjusted: float
    calibrated: bool


def calibration_verdicts(
    p_values: Mapping[Hashable, float], alpha: float = 0.05, method: str = "holm"
) -> dict[Hashable, Verdict]:
    """ "Calibrated at level ``alpha``?" for many p-values keyed by e.g. ``(model, calibrator)``.

    The p-values are adjusted jointly, Holm's step-down (default, family-wise error at
    ``alpha`` under any dependence; see the module docstring for why) or Benjamini-Hochberg
    (``method="bh"``, false discovery rate); a pair is *calibrated* when its adjusted p-value
    exceeds ``alpha`` (no evidence of miscalibration, not proof of calibration).
    """
    method = check_choice(method, "method", CORRECTIONS)
    if isinstance(alpha, bool) or not isinstance(alpha, float | int) or not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be a number in (0, 1), got {alpha!r}")
    if not isinstance(p_values, Mapping) or not p_values:
        raise ValueError("p_values must be a non-empty dict {(model, calibrator): p-value}")
    keys = list(p_values)
    p = np.array([p_values[k] for k in keys], dtype=np.float64)
    if not np.all(np.isfinite(p)) or np.any((p < 0.0) | (p > 1.0)):
        raise ValueError("p-values must be finite numbers in [0, 1]; drop the pairs without a test")
    adjusted = holm(p) if method == "holm" else benjamini_hochberg(p)
    return {
        k: Verdict(float(p[i]), float(adjusted[i]), bool(adjusted[i] > alpha))
        for i, k in enumerate(keys)
    }
