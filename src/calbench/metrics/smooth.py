"""Smooth ECE: a binning-free calibration error by kernel smoothing (Blasiok & Nakkiran 2023).

Blasiok & Nakkiran, "Smooth ECE: Principled Reliability Diagrams via Kernel Smoothing"
(ICLR 2024; arXiv 2309.12236, 2023). For predictions ``f_i`` in [0, 1] and outcomes ``y_i`` in
{0, 1} (top-label: the confidence and the correctness; binary: ``p(class 1)`` and the label),
the residuals ``r_i = y_i - f_i`` are smoothed with the *reflected* Gaussian kernel on [0, 1]:

    K_sigma(t, x) = sum_{k in Z} phi_sigma(t - x - 2k) + phi_sigma(t + x - 2k),

the density at ``t`` of ``pi(x + eta)``, ``eta ~ N(0, sigma^2)``, where ``pi`` folds the real line
onto [0, 1] (even, period 2); it integrates to 1 over [0, 1] for every ``x`` (their sec. 3,
"reflected Gaussian kernel"). Their eq. for the smoothed residual and density gives

    smECE_sigma = int_0^1 |r_hat(t)| delta_hat(t) dt = int_0^1 |(1/n) sum_i r_i K_sigma(t, f_i)| dt,

and the smooth ECE is ``smECE_sigma*`` at the fixed point ``smECE_sigma* = sigma*`` (their
Definition of smECE with the bandwidth chosen by the fixed-point rule; ``smECE_sigma`` decreases
in ``sigma``, so the fixed point is unique). As in their reference implementation (relplot), the
fixed point is found by bisection on (0, 1] to a resolution of ``2**-10`` with bandwidths below
``1e-3`` treated as too small, and the value is ``smECE_sigma`` at the upper end of the final
bracket (a ``sigma`` with ``sigma >= smECE_sigma``).

Numerics (built here from the definition): the residuals are linearly binned onto a grid of
``M`` nodes on [0, 1] (``M - 1 >= 25 / sigma`` intervals, at least 2000); the reflected kernel
acting on a grid is a circular convolution of the grid's even, period-2 extension (a node on 0
or 1 is its own mirror image, so it carries twice its mass there) with the wrapped Gaussian,
done by FFT; the integral is the trapezoid rule on the grid. A constant prediction ``c`` gives
``smECE = |mean(y) - c|`` to rounding (the kernel integrates to 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calbench._checks import check_binary_pairs, check_probs_labels
from calbench.metrics.binning import top_label

#: Bisection resolution of the bandwidth and the smallest bandwidth tried (Blasiok & Nakkiran
#: 2023's reference implementation: 10 halvings of (0, 1], eps = 1e-3).
SIGMA_TOL = 2.0**-10
MIN_SIGMA = 1e-3
#: Grid intervals per bandwidth (h <= sigma / 25) and the smallest grid.
_NODES_PER_SIGMA = 25.0
_MIN_INTERVALS = 2000
#: Wrapped-Gaussian images are kept while ``2 |k| - 1 <= |d + 2k|`` can be within this many
#: bandwidths (the dropped terms are below exp(-72) of the peak).
_IMAGE_REACH = 12.0


@dataclass(frozen=True)
class SmoothECE:
    """The smooth ECE ``value`` (a fraction) and the bandwidth ``sigma`` it used."""

    value: float
    sigma: float

    def __float__(self) -> float:
        return self.value


def _intervals(sigma: float) -> int:
    return max(_MIN_INTERVALS, int(np.ceil(_NODES_PER_SIGMA / sigma)))


def linear_binning(f: np.ndarray, v: np.ndarray, intervals: int) -> np.ndarray:
    """Masses ``v_i`` at ``f_i`` in [0, 1] split between the two nearest of ``intervals + 1``
    equally spaced nodes in proportion to their closeness (linear binning, Wand 1994)."""
    x = f * intervals
    idx = np.minimum(x.astype(np.int64), intervals - 1)
    frac = x - idx
    m = intervals + 1
    return np.bincount(idx, v * (1.0 - frac), minlength=m) + np.bincount(
        idx + 1, v * frac, minlength=m
    )


def _wrapped_gaussian(sigma: float, intervals: int) -> np.ndarray:
    """The reflected kernel's circular form: ``sum_k phi_sigma(d + 2k)`` at the ``2 * intervals``
    offsets ``d = m h`` of the period-2 circle (``h = 1 / intervals``)."""
    period = 2 * intervals
    m = np.arange(period)
    d = np.where(m <= intervals, m, m - period) / intervals
    k_max = int((1.0 + _IMAGE_REACH * sigma) // 2)  # |d| <= 1, so |d + 2k| >= 2 |k| - 1
    images = np.arange(-k_max, k_max + 1)
    z = (d[:, None] + 2.0 * images[None, :]) / sigma
    return np.exp(-0.5 * z * z).sum(axis=1) / (sigma * np.sqrt(2.0 * np.pi))


def reflect_smooth(masses: np.ndarray, sigma: float) -> np.ndarray:
    """``S(t_j) = sum_i masses_i K_sigma(t_j, t_i)`` on the grid ``t_j = j / (M - 1)`` for masses
    on that grid (last axis; leading axes are batched), by FFT on the even period-2 extension."""
    masses = np.asarray(masses, dtype=np.float64)
    intervals = masses.shape[-1] - 1
    ext = np.concatenate([masses, masses[..., -2:0:-1]], axis=-1)
    ext[..., 0] *= 2.0  # 0 and 1 are their own mirror images: K(t, 0) = 2 phi(t) + ...
    ext[..., intervals] *= 2.0
    kernel = np.fft.rfft(_wrapped_gaussian(sigma, intervals))
    out = np.fft.irfft(np.fft.rfft(ext, axis=-1) * kernel, n=2 * intervals, axis=-1)
    return out[..., : intervals + 1]


def _trapezoid(values: np.ndarray) -> np.ndarray:
    h = 1.0 / (values.shape[-1] - 1)
    return h * (values.sum(axis=-1) - 0.5 * (values[..., 0] + values[..., -1]))


class _Residuals:
    """``(1/n) sum_i r_i K_sigma(t, f_i)`` for any ``sigma``, the binning cached per grid."""

    def __init__(self, f: np.ndarray, y: np.ndarray):
        self.f = f
        self.r = (y - f) / f.shape[0]
        self._grids: dict[int, np.ndarray] = {}

    def smece_sigma(self, sigma: float) -> float:
        intervals = _intervals(sigma)
        if intervals not in self._grids:
            self._grids[intervals] = linear_binning(self.f, self.r, intervals)
        return float(_trapezoid(np.abs(reflect_smooth(self._grids[intervals], sigma))))


_check_1d = check_binary_pairs  # (f, y) checked: predictions in [0, 1], outcomes 0/1


def _check_sigma(sigma) -> float:
    ok = isinstance(sigma, int | float | np.integer | np.floating) and not isinstance(sigma, bool)
    if not ok or not np.isfinite(sigma) or not 0.0 < sigma <= 1.0:
        raise ValueError(f"sigma must be a number in (0, 1] or None (fixed point), got {sigma!r}")
    return float(sigma)


def fixed_point_sigma(smece_sigma, tol: float = SIGMA_TOL, min_sigma: float = MIN_SIGMA) -> float:
    """Bandwidth of the fixed-point rule ``smECE_sigma = sigma`` (Blasiok & Nakkiran 2023) by
    bisection on (0, 1]: the upper end of the last bracket (``sigma >= smECE_sigma``; bandwidths
    below ``min_sigma`` count as too small), after ``ceil(log2(1 / tol))`` halvings."""
    if 1.0 < smece_sigma(1.0):  # no bandwidth in (0, 1] reaches the fixed point
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(int(np.ceil(np.log2(1.0 / tol)))):
        mid = 0.5 * (lo + hi)
        if mid < min_sigma or mid < smece_sigma(mid):
            lo = mid
        else:
            hi = mid
    return hi


def smooth_ece_1d(f, y, sigma: float | None = None) -> SmoothECE:
    """Smooth ECE of predictions ``f`` in [0, 1] against outcomes ``y`` in {0, 1} (the module's
    definition); ``sigma`` fixes the bandwidth instead of the fixed-point rule."""
    f, y = _check_1d(f, y)
    res = _Residuals(f, y)
    s = fixed_point_sigma(res.smece_sigma) if sigma is None else _check_sigma(sigma)
    return SmoothECE(res.smece_sigma(s), s)


def smooth_ece_from_values(conf: np.ndarray, correct: np.ndarray) -> float:
    """Smooth ECE from validated top-label confidences and correctness (the registry's form)."""
    return smooth_ece_1d(conf, correct).value


def smooth_ece(probs, labels, sigma: float | None = None) -> float:
    """Top-label smooth ECE (Blasiok & Nakkiran 2023): ``f_i = max_k probs[i, k]``,
    ``y_i = 1[argmax_k probs[i, k] == labels[i]]``. Returns a fraction. ``sigma`` fixes the
    kernel bandwidth (default: their fixed-point rule); :func:`smooth_ece_1d` also returns it."""
    p, y = check_probs_labels(probs, labels)
    conf, correct = top_label(p, y)
    return smooth_ece_1d(conf, correct, sigma).value


def smooth_ece_binary(probs, labels, sigma: float | None = None) -> float:
    """Binary smooth ECE (Blasiok & Nakkiran 2023): ``f_i = probs[i, 1]``, ``y_i = labels[i]``
    for two-class probabilities ``(N, 2)``. Returns a fraction."""
    p, y = check_probs_labels(probs, labels)
    if p.shape[1] != 2:
        raise ValueError(
            f"smooth_ece_binary needs two-class probabilities (N, 2), got {p.shape[1]} classes; "
            "use smooth_ece for the top-label error"
        )
    return smooth_ece_1d(p[:, 1], (y == 1).astype(np.float64), sigma).value


@dataclass(frozen=True)
class SmoothCurve:
    """A kernel-smoothed reliability curve on ``t``: ``mean`` = ``E[y | f = t]`` (Nadaraya-Watson
    with the reflected kernel), ``lower`` / ``upper`` its pointwise bootstrap band, ``n_local``
    the kernel-weighted number of samples near ``t`` (``sum_i K(t, f_i) sqrt(2 pi) sigma``, the
    count of samples within about one bandwidth), ``sigma`` the bandwidth."""

    t: np.ndarray
    mean: np.ndarray
    lower: np.ndarray | None
    upper: np.ndarray | None
    n_local: np.ndarray
    sigma: float


def smooth_reliability(
    f,
    y,
    sigma: float | None = None,
    *,
    n_points: int = 201,
    n_bootstrap: int = 100,
    level: float = 0.9,
    seed: int = 0,
) -> SmoothCurve:
    """Kernel-smoothed reliability curve with a bootstrap band, as Blasiok & Nakkiran (2023,
    sec. 5, "smooth reliability diagrams") draw it: ``mu(t) = sum_i K(t, f_i) y_i /
    sum_i K(t, f_i)`` with their reflected Gaussian kernel at the smooth ECE's fixed-point
    bandwidth (or ``sigma``), on ``n_points`` points of [0, 1]; the band is the pointwise
    ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of ``mu`` over ``n_bootstrap`` resamples
    of the pairs ``(f_i, y_i)`` at the same bandwidth (``n_bootstrap=0``: no band)."""
    f, y = _check_1d(f, y)
    if isinstance(n_points, bool) or not isinstance(n_points, int) or n_points < 2:
        raise ValueError(f"n_points must be an integer >= 2, got {n_points!r}")
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, int) or n_bootstrap < 0:
        raise ValueError(f"n_bootstrap must be an integer >= 0, got {n_bootstrap!r}")
    if not isinstance(level, float) or not 0.0 < level < 1.0:
        raise ValueError(f"level must be a float in (0, 1), got {level!r}")
    if sigma is None:
        sigma = fixed_point_sigma(_Residuals(f, y).smece_sigma)
    sigma = _check_sigma(sigma)
    n = f.shape[0]
    # a grid whose nodes include the n_points output points, h <= sigma / 25 (a curve to draw
    # needs no more: the smooth ECE's 2000-interval floor serves its integral)
    step = max(1, int(np.ceil(_NODES_PER_SIGMA / sigma / (n_points - 1))))
    intervals = step * (n_points - 1)
    x = f * intervals
    idx = np.minimum(x.astype(np.int64), intervals - 1)
    frac = x - idx

    m = intervals + 1

    def curves(weights):  # weights (B, n) -> (numerator, denominator) on the output points
        w = np.atleast_2d(weights)
        rows = w.shape[0]
        ids = (np.arange(rows)[:, None] * m + idx[None, :]).ravel()  # one bincount for all rows
        out = []
        for value in (y, 1.0):
            left = (w * (value * (1 - frac))).ravel()
            right = (w * (value * frac)).ravel()
            grid = np.bincount(ids, left, minlength=rows * m)
            grid += np.bincount(ids + 1, right, minlength=rows * m)
            out.append(grid.reshape(rows, m))
        sm = reflect_smooth(np.concatenate(out), sigma)[:, ::step]
        return sm[:rows], sm[rows:]

    num, den = curves(np.ones(n))
    mean = np.divide(num[0], den[0], out=np.full(n_points, np.nan), where=den[0] > 0)
    n_local = den[0] * np.sqrt(2.0 * np.pi) * sigma
    lower = upper = None
    if n_bootstrap:
        rng = np.random.default_rng(seed)
        draws = rng.integers(0, n, size=(n_bootstrap, n))  # resampled indices, as multiplicities
        offset = (np.arange(n_bootstrap, dtype=np.int64) * n)[:, None]  # one bincount for all
        weights = np.bincount((draws + offset).ravel(), minlength=n_bootstrap * n)
        weights = weights.reshape(n_bootstrap, n).astype(np.float64)
        bnum, bden = curves(weights)
        boot = np.divide(bnum, bden, out=np.full(bnum.shape, np.nan), where=bden > 1e-12)
        lower, upper = np.full(n_points, np.nan), np.full(n_points, np.nan)
        qs = [(1 - level) / 2, (1 + level) / 2]
        full = np.all(np.isfinite(boot), axis=0)
        if full.any():
            lower[full], upper[full] = np.quantile(boot[:, full], qs, axis=0)
        part = ~full & np.any(np.isfinite(boot), axis=0)  # mass in only some resamples
        if part.any():
            lower[part], upper[part] = np.nanquantile(boot[:, part], qs, axis=0)
    return SmoothCurve(np.linspace(0.0, 1.0, n_points), mean, lower, upper, n_local, sigma)
