"""Multiple-testing adjustments of many p-values: Holm's step-down (family-wise error under any
dependence), Benjamini-Hochberg's step-up (false discovery rate), and the smallest adjusted
p-value a test of limited resolution can reach. numpy only: :mod:`calbench.caltests` and
:mod:`calbench.stats` both use it without importing each other."""

from __future__ import annotations

import numpy as np


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
