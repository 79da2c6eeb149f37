"""Hypothesis tests of calibration with analytic p-values: the kernels of the registry's
calibration-test metrics.

Every test takes predictions ``f_i`` in [0, 1] and outcomes ``y_i`` in {0, 1} under the null
hypothesis of perfect calibration, ``P(y_i = 1 | f_i) = f_i``; for multiclass probabilities the
*top-label* pair is tested (``f_i = max_k p_ik``, ``y_i = 1[argmax_k p_ik == label_i]``; Gupta &
Ramdas 2022, "Top-label calibration"), for two-class probabilities optionally the binary pair
(``target="binary"``: ``f_i = p_i1``, ``y_i = label_i``).

* **Spiegelhalter's Z** (Spiegelhalter 1986, "Probabilistic prediction in patient management and
  clinical trials", Statistics in Medicine 5, eq. for Z in sec. 3.3): the Brier score's
  deviation from its null mean over its null standard deviation,
  ``Z = sum_i (y_i - f_i)(1 - 2 f_i) / sqrt(sum_i (1 - 2 f_i)^2 f_i (1 - f_i))``, asymptotically
  N(0, 1). Two-sided by default (miscalibration in either direction); ``alternative="greater"``
  gives the one-sided ``1 - Phi(Z)`` (large Z: outcomes below the top-label predictions, i.e.
  over-confidence).
* **Kolmogorov-Smirnov and Kuiper tests on the cumulative differences** (Arrieta-Ibarra, Gujral,
  Tannen, Tygert & Xu 2022, "Metrics of calibration for probabilistic predictions", JMLR 23,
  eqs. (9)-(12); Gupta, Rahimi, Ajanthan, Mensink, Sminchisescu & Hartley 2021, "Calibration of
  neural networks using splines", eq. (8)): with the samples sorted by ``f``,
  ``C_k = (1/n) sum_{i <= k} (y_i - f_i)`` (``C_0 = 0``) and the scale
  ``sigma = sqrt(sum_i f_i (1 - f_i)) / n``. Under the null ``C / sigma`` is asymptotically a
  standard Brownian motion on [0, 1] observed at the times ``sum_{i<=k} f_i (1 - f_i) /
  sum_i f_i (1 - f_i)``, so the KS statistic ``max_k |C_k| / sigma`` has the law of
  ``sup |B|`` (Darling & Siegert 1953) and Kuiper's ``(max_k C_k - min_k C_k) / sigma`` that of
  the range of B (Feller 1951); both p-values are evaluated from series for the survival
  function that do not lose precision in the tail (Tygert 2022, "Calibration of P-values for
  calibration and for deviation of a subpopulation from the full population").

  Ties in ``f`` are handled without randomness: ``C`` is read only at the end of each run of
  equal predictions (the order within a run is arbitrary, and no ordering of it is preferred).
  The range includes ``C_0 = 0``, the start of the path.

The p-values are the registry's ``spiegelhalter_p``, ``ks_cal_p`` and ``kuiper_cal_p``
(:mod:`calbench.metrics.registry`); "calibrated at level alpha?" verdicts over many of them,
with Holm's or Benjamini-Hochberg's adjustment, are
:func:`calbench.stats.multiplicity.calibration_verdicts`. scipy is imported inside the
functions that evaluate a normal tail, so ``import calbench.metrics`` does not load it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calbench._checks import check_binary_pairs, check_choice, check_probs_labels
from calbench.metrics.binning import top_label

TARGETS = ("top", "binary")
ALTERNATIVES = ("two-sided", "greater", "less")


@dataclass(frozen=True)
class CalibrationTest:
    """A test's ``statistic`` and ``p_value`` (null: perfectly calibrated)."""

    name: str
    statistic: float
    p_value: float


# --------------------------------------------------------------------------------------------
# input
# --------------------------------------------------------------------------------------------
def _pairs(probs, labels, target: str) -> tuple[np.ndarray, np.ndarray]:
    target = check_choice(target, "target", TARGETS)
    p, y = check_probs_labels(probs, labels)
    if target == "top":
        return top_label(p, y)
    if p.shape[1] != 2:
        raise ValueError(
            f"target='binary' needs two-class probabilities (N, 2), got {p.shape[1]} classes; "
            "use target='top'"
        )
    return np.asarray(p[:, 1], dtype=np.float64), (y == 1).astype(np.float64)


_check_1d = check_binary_pairs  # (f, y) checked: predictions in [0, 1], outcomes 0/1


def _null_variance(v: float, what: str) -> float:
    if not v > 0.0:
        raise ValueError(
            f"{what} is undefined: every prediction is 0 or 1{' or 0.5' if 'Spiegel' in what else ''}, "
            "so the null variance is zero; test predictions strictly inside (0, 1)"
        )
    return v


# --------------------------------------------------------------------------------------------
# null distributions (survival functions, accurate in the tail)
# --------------------------------------------------------------------------------------------
def sup_abs_brownian_sf(x: float) -> float:
    """``P(sup_{0<=t<=1} |B_t| > x)`` for standard Brownian motion B (Darling & Siegert 1953).

    Large x: the reflection series ``4 sum_{k>=1} (-1)^(k-1) Phi_bar((2k - 1) x)``; small x: one
    minus the theta series ``(4 / pi) sum_{k>=0} (-1)^k / (2k + 1) exp(-(2k + 1)^2 pi^2 / (8 x^2))``
    (Feller 1971, vol. II, sec. X.5); each converges in a few terms on its side of x = 1.
    """
    from scipy.special import ndtr

    x = float(x)
    if x <= 0.0:
        return 1.0
    if x >= 1.0:
        k = np.arange(1, 40)
        return float(min(1.0, 4.0 * np.sum((-1.0) ** (k - 1) * ndtr(-(2 * k - 1) * x))))
    k = np.arange(0, 40)
    odd = 2 * k + 1
    cdf = 4.0 / np.pi * np.sum((-1.0) ** k / odd * np.exp(-(odd**2) * np.pi**2 / (8 * x * x)))
    return float(min(1.0, max(0.0, 1.0 - cdf)))


def brownian_range_sf(x: float) -> float:
    """``P(max_t B_t - min_t B_t > x)`` over [0, 1] for standard Brownian motion (Feller 1951,
    "The asymptotic distribution of the range of sums of independent random variables").

    Large x: integrating Feller's density ``8 sum_{k>=1} (-1)^(k-1) k^2 phi(k x)`` gives
    ``8 sum_{k>=1} (-1)^(k-1) k Phi_bar(k x)``; small x: one minus the theta form of the CDF,
    ``sum_{k>=0} (8 / x^2 + 2 / (k + 1/2)^2 / pi^2) exp(-2 (k + 1/2)^2 pi^2 / x^2)`` (Tygert 2022,
    eq. for the range); each converges in a few terms on its side of x = 2.
    """
    from scipy.special import ndtr

    x = float(x)
    if x <= 0.0:
        return 1.0
    if x >= 2.0:
        k = np.arange(1, 40)
        return float(min(1.0, 8.0 * np.sum((-1.0) ** (k - 1) * k * ndtr(-k * x))))
    h = np.arange(0, 40) + 0.5
    cdf = np.sum((8.0 / x**2 + 2.0 / (h**2 * np.pi**2)) * np.exp(-2.0 * h**2 * np.pi**2 / x**2))
    return float(min(1.0, max(0.0, 1.0 - cdf)))


# --------------------------------------------------------------------------------------------
# the tests on (f, y) pairs
# --------------------------------------------------------------------------------------------
def cumulative_differences(f, y) -> np.ndarray:
    """``C_k = (1/n) sum_{i <= k} (y_i - f_i)`` with the samples sorted by ``f`` (Arrieta-Ibarra
    et al. 2022, eq. (9)), read at the end of each run of tied predictions, with ``C_0 = 0``
    first."""
    f, y = _check_1d(f, y)
    order = np.argsort(f, kind="stable")
    fs = f[order]
    c = np.cumsum(y[order] - fs) / f.shape[0]
    ends = np.flatnonzero(np.r_[fs[1:] != fs[:-1], True])
    return np.r_[0.0, c[ends]]


def _scale(f: np.ndarray, what: str) -> float:
    return np.sqrt(_null_variance(float(np.sum(f * (1.0 - f))), what)) / f.shape[0]


def ks_test_1d(f, y) -> CalibrationTest:
    """Kolmogorov-Smirnov calibration test: ``max_k |C_k| / sigma`` against ``sup |B|``."""
    f, y = _check_1d(f, y)
    stat = float(np.max(np.abs(cumulative_differences(f, y))) / _scale(f, "The KS test"))
    return CalibrationTest("ks", stat, sup_abs_brownian_sf(stat))


def kuiper_test_1d(f, y) -> CalibrationTest:
    """Kuiper calibration test: ``(max_k C_k - min_k C_k) / sigma`` against the range of B."""
    f, y = _check_1d(f, y)
    c = cumulative_differences(f, y)
    stat = float((c.max() - c.min()) / _scale(f, "Kuiper's test"))
    return CalibrationTest("kuiper", stat, brownian_range_sf(stat))


def spiegelhalter_test_1d(f, y, alternative: str = "two-sided") -> CalibrationTest:
    """Spiegelhalter's Z test (Spiegelhalter 1986): ``Z`` as in the module docstring against
    N(0, 1); ``alternative``: ``"two-sided"`` ``2 Phi(-|Z|)``, ``"greater"`` ``Phi(-Z)``,
    ``"less"`` ``Phi(Z)``."""
    from scipy.special import ndtr

    alternative = check_choice(alternative, "alternative", ALTERNATIVES)
    f, y = _check_1d(f, y)
    w = 1.0 - 2.0 * f
    var = _null_variance(float(np.sum(w * w * f * (1.0 - f))), "Spiegelhalter's test")
    z = float(np.sum((y - f) * w) / np.sqrt(var))
    p = {"two-sided": 2.0 * ndtr(-abs(z)), "greater": ndtr(-z), "less": ndtr(z)}[alternative]
    return CalibrationTest("spiegelhalter", z, float(min(1.0, p)))


# --------------------------------------------------------------------------------------------
# on probabilities
# --------------------------------------------------------------------------------------------
def spiegelhalter_test(
    probs, labels, *, target: str = "top", alternative: str = "two-sided"
) -> CalibrationTest:
    """Spiegelhalter's Z test of probabilities ``(N, K)`` against labels (top-label pairs, or
    the binary pair with ``target="binary"``)."""
    return spiegelhalter_test_1d(*_pairs(probs, labels, target), alternative=alternative)


def ks_calibration_test(probs, labels, *, target: str = "top") -> CalibrationTest:
    """Kolmogorov-Smirnov test on the cumulative differences (Arrieta-Ibarra et al. 2022)."""
    return ks_test_1d(*_pairs(probs, labels, target))


def kuiper_calibration_test(probs, labels, *, target: str = "top") -> CalibrationTest:
    """Kuiper test on the cumulative differences (Arrieta-Ibarra et al. 2022)."""
    return kuiper_test_1d(*_pairs(probs, labels, target))


def calibration_tests(probs, labels, *, target: str = "top") -> dict[str, CalibrationTest]:
    """All three tests (two-sided Spiegelhalter), keyed by name."""
    f, y = _pairs(probs, labels, target)
    return {
        t.name: t for t in (spiegelhalter_test_1d(f, y), ks_test_1d(f, y), kuiper_test_1d(f, y))
    }
