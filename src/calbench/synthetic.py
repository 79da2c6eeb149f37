"""A synthetic classifier whose population calibration errors are known: ground truth for the
coverage of the bootstrap intervals (:mod:`calbench.stats`, docs/statistics.md).

The model follows the simulation design of Roelofs et al. (2022, "Mitigating bias in calibration
error estimation", §4): a parametric confidence distribution and a parametric true-accuracy
curve, so that the calibration error of the *population* can be computed by integration. Here,
for ``K`` classes:

* the top-label confidence is ``c = 1/K + (1 - 1/K) B`` with ``B ~ Beta(a, b)``;
* the predicted class is uniform over the ``K`` classes; every other class gets ``(1 - c)/(K - 1)``;
* the prediction is correct with probability ``f(c) = c ** gamma`` (``gamma > 1``: over-confident,
  ``gamma = 1``: calibrated), otherwise the label is uniform over the other classes.

:func:`population_errors` integrates the binned errors of this distribution on a fine grid with
the same equal-width ``[a, b)`` bins as :mod:`calbench.metrics` (15 by default): the top-label
ECE and MCE (Guo et al. 2017, eqs. 3-5 with expectations in place of sample means) and the
classwise ECE (Kull et al. 2019), i.e. the values the plug-in estimators converge to as N grows.
:func:`population_scores` integrates the means the report gives intervals for: accuracy, NLL
and Brier score (and their registry variants ``nll_modern``, ``nll_kull``, ``brier_kull``).

A second prediction set on the *same* samples and labels, for paired comparisons
(:func:`variant`): the model's probabilities temperature-scaled, ``softmax(log p / T)`` (Guo et
al. 2017, what the ``ts`` calibrator does to logits), and, on a random share ``swap`` of the
samples drawn independently of everything else, the top class's probability exchanged with
that of a uniformly drawn other class (a prediction set whose accuracy differs). Every row
still holds one value ``c_T`` and ``K - 1`` equal values, and the label is the predicted class
with probability ``f_s(c) = (1 - swap) f(c) + swap (1 - f(c)) / (K - 1)``, otherwise uniform
over the other classes; every metric above is a function of ``(c_T, f_s)``, so both functions
take ``temperature`` and ``swap`` and give the population values of the variant exactly. The
integrals are one-dimensional (over the Beta variable): the midpoint rule on ``points``
equal-width cells, each weighted by its exact Beta probability (differences of the CDF).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from calbench.metrics.binning import ECE_BINS, width_bin_ids
from calbench.metrics.scoring import STUDY_EPS
from calbench.metrics.smooth import linear_binning, reflect_smooth


@dataclass(frozen=True)
class SyntheticModel:
    """Parameters of the synthetic classifier (see the module docstring)."""

    n_classes: int = 10
    a: float = 5.0
    b: float = 1.5
    gamma: float = 1.6

    def __post_init__(self) -> None:
        if self.n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got {self.n_classes}")
        if min(self.a, self.b, self.gamma) <= 0:
            raise ValueError("a, b and gamma must be positive")

    def accuracy_at(self, c: np.ndarray) -> np.ndarray:
        return np.asarray(c, dtype=np.float64) ** self.gamma

    def sample(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` rows of probabilities ``(n, K)`` (float64) and their labels."""
        k = self.n_classes
        c = 1.0 / k + (1.0 - 1.0 / k) * rng.beta(self.a, self.b, size=n)
        top = rng.integers(0, k, size=n)
        probs = np.repeat(((1.0 - c) / (k - 1))[:, None], k, axis=1)
        probs[np.arange(n), top] = c
        correct = rng.random(n) < self.accuracy_at(c)
        other = (top + rng.integers(1, k, size=n)) % k  # uniform over the other classes
        labels = np.where(correct, top, other)
        return probs, labels


@dataclass(frozen=True)
class WiggleModel(SyntheticModel):
    """:class:`SyntheticModel` whose true-accuracy curve temperature scaling cannot straighten:
    ``f(c) = clip(c^gamma + 4 wiggle (c - 1/K)(1 - c)(2u - 1), 0, 1)`` with ``u = (c - 1/K) / (1 -
    1/K)`` the Beta variable, under-confident below the middle of the confidence range and
    over-confident above it (``wiggle > 0``). ``wiggle = 0`` is :class:`SyntheticModel`. Every
    population function of this module takes it (they read :meth:`accuracy_at`): a one-parameter
    calibrator is then misspecified, a monotone non-parametric one (isotonic regression) is not,
    so ``wiggle`` moves the gap between their population errors through zero."""

    gamma: float = 1.0
    wiggle: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.wiggle <= 1.0:
            raise ValueError(f"wiggle must lie in [0, 1], got {self.wiggle!r}")

    def accuracy_at(self, c: np.ndarray) -> np.ndarray:
        c = np.asarray(c, dtype=np.float64)
        k = self.n_classes
        u = (c - 1.0 / k) / (1.0 - 1.0 / k)
        bump = 4.0 * self.wiggle * (c - 1.0 / k) * (1.0 - c) * (2.0 * u - 1.0)
        return np.clip(c**self.gamma + bump, 0.0, 1.0)


def variant(
    probs: np.ndarray,
    temperature: float = 1.0,
    swap: float = 0.0,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """The second prediction set of the module docstring from ``probs`` of
    :meth:`SyntheticModel.sample`: ``softmax(log probs / temperature)``, then on a random share
    ``swap`` of the rows (``rng``) the top class's probability exchanged with a uniformly drawn
    other class's. Population values: :func:`population_scores` and :func:`population_errors`
    with the same ``temperature`` and ``swap``."""
    _check_variant(temperature, swap)
    p = np.asarray(probs, dtype=np.float64)
    n, k = p.shape
    z = np.log(p) / temperature
    z -= z.max(axis=1, keepdims=True)
    out = np.exp(z)
    out /= out.sum(axis=1, keepdims=True)
    if swap > 0.0:
        if rng is None:
            raise ValueError("swap > 0 needs a random generator rng")
        rows = np.flatnonzero(rng.random(n) < swap)
        top = np.argmax(out[rows], axis=1)
        other = (top + rng.integers(1, k, size=rows.shape[0])) % k
        a, b = out[rows, top], out[rows, other]
        out[rows, top], out[rows, other] = b, a
    return out


def _check_variant(temperature: float, swap: float) -> None:
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature!r}")
    if not 0.0 <= swap <= 1.0:
        raise ValueError(f"swap must lie in [0, 1], got {swap!r}")


def _outcomes(model: SyntheticModel, points: int, temperature: float, swap: float):
    """On the integration grid: weights ``w``, the top probability ``c_T`` and each other
    class's ``q_T`` of the variant, and the probability ``f_s`` that the label is its top class."""
    _check_variant(temperature, swap)
    k = model.n_classes
    c, w = _grid(model, points)
    f = model.accuracy_at(c)
    if temperature == 1.0:
        c_t, q_t = c, (1.0 - c) / (k - 1)
    else:  # the logit gap between the top class and every other class, divided by T
        e = np.exp(-(np.log(c) - np.log((1.0 - c) / (k - 1))) / temperature)
        c_t = 1.0 / (1.0 + (k - 1) * e)
        q_t = e * c_t
    f_s = (1.0 - swap) * f + swap * (1.0 - f) / (k - 1)
    return w, c_t, q_t, f_s


@lru_cache(maxsize=8)
def _grid(model: SyntheticModel, points: int) -> tuple[np.ndarray, np.ndarray]:
    """Midpoints ``c`` and probability weights of the confidence distribution (cached, read-only:
    a simulation asks for many variants of one model)."""
    from scipy.stats import beta

    k = model.n_classes
    u_edges = np.linspace(0.0, 1.0, points + 1)
    w = np.diff(beta.cdf(u_edges, model.a, model.b))
    u = 0.5 * (u_edges[:-1] + u_edges[1:])
    c = 1.0 / k + (1.0 - 1.0 / k) * u
    c.setflags(write=False)
    w.setflags(write=False)
    return c, w


def _binned(x, weight, conf, target, n_bins, ids=None) -> tuple[float, float, float]:
    """Population ``sum_b P(b) |E[target|b] - E[conf|b]|``, the largest bin gap and the root
    of the squared error ``sqrt(sum_b P(b) (E[target|b] - E[conf|b])^2)``."""
    ids = width_bin_ids(x, n_bins) if ids is None else ids
    mass = np.bincount(ids, weights=weight, minlength=n_bins)
    gap = np.bincount(ids, weights=weight * (target - conf), minlength=n_bins)
    used = mass > 0
    sq = float(np.sum(gap[used] ** 2 / mass[used]))
    return float(np.abs(gap).sum()), float(np.max(np.abs(gap[used] / mass[used]))), sq**0.5


def population_errors(
    model: SyntheticModel,
    n_bins: int = ECE_BINS,
    points: int = 400_000,
    temperature: float = 1.0,
    swap: float = 0.0,
) -> dict:
    """Population top-label ECE, MCE and classwise ECE of ``model`` with ``n_bins`` bins (of its
    :func:`variant` with ``temperature`` and ``swap``, by default the model itself), and the
    roots of the squared binned errors the unbiased estimators target
    (:mod:`calbench.metrics.unbiased`): ``ece_ub`` (equal-width), ``ece_ub_mass`` (equal-mass
    bins at the population quantiles of the confidence) and ``cwece_ub``."""
    k = model.n_classes
    w, c, q, f = _outcomes(model, points, temperature, swap)
    ece, mce, ece_ub = _binned(c, w, c, f, n_bins)
    # c increases with the grid cell: the cell's mid cumulative mass gives its quantile bin
    mid = np.cumsum(w) - w / 2.0
    mass_ids = np.minimum((mid / w.sum() * n_bins).astype(np.int64), n_bins - 1)
    _, _, ece_ub_mass = _binned(c, w, c, f, n_bins, mass_ids)
    # one class j: it is the predicted class with probability 1/K (value c, label prob f),
    # else it holds q = (1 - c)/(K - 1) with label prob (1 - f)/(K - 1)
    x = np.concatenate([c, q])
    weight = np.concatenate([w / k, w * (k - 1) / k])
    target = np.concatenate([f, (1.0 - f) / (k - 1)])
    cwece, _, cwece_ub = _binned(x, weight, x, target, n_bins)
    return {
        "ece": ece,
        "mce": mce,
        "cwece": cwece,
        "ece_ub": ece_ub,
        "ece_ub_mass": ece_ub_mass,
        "cwece_ub": cwece_ub,
    }


def population_scores(
    model: SyntheticModel,
    temperature: float = 1.0,
    swap: float = 0.0,
    points: int = 400_000,
) -> dict:
    """Population accuracy, NLL and Brier score of ``model`` (of its :func:`variant` with
    ``temperature`` and ``swap``), as :data:`calbench.metrics.METRICS` defines them:
    ``accuracy``, ``nll`` and ``nll_kull`` (scikit-learn <= 1.0 clip to [1e-15, 1 - 1e-15] and
    row renormalisation), ``nll_modern`` (float64 machine-epsilon clip), ``brier`` (sum over
    classes) and ``brier_kull`` (divided by K): expectations over the confidence distribution
    of the per-sample value when the label is the top class (probability ``f_s``) and when it
    is one of the others."""
    k = model.n_classes
    w, c, q, f = _outcomes(model, points, temperature, swap)

    def mean(hit, miss):
        return float(np.sum(w * (f * hit + (1.0 - f) * miss)))

    cc, qc = np.clip(c, STUDY_EPS, 1 - STUDY_EPS), np.clip(q, STUDY_EPS, 1 - STUDY_EPS)
    row = cc + (k - 1) * qc
    eps = np.finfo(np.float64).eps
    nll = mean(-np.log(cc / row), -np.log(qc / row))
    brier = mean((1.0 - c) ** 2 + (k - 1) * q**2, c**2 + (1.0 - q) ** 2 + (k - 2) * q**2)
    return {
        "accuracy": mean(1.0, 0.0),
        "nll": nll,
        "nll_kull": nll,
        "nll_modern": mean(-np.log(np.clip(c, eps, 1 - eps)), -np.log(np.clip(q, eps, 1 - eps))),
        "brier": brier,
        "brier_kull": brier / k,
    }


def population_reliability(
    model: SyntheticModel, t, sigma: float | None = None, points: int = 400_000
) -> np.ndarray:
    """The population top-label reliability curve ``P(correct | confidence = t)`` of ``model``
    at the points ``t`` (``f(t) = t ** gamma`` on the confidences' support ``[1/K, 1]``, NaN
    elsewhere), or with ``sigma`` its kernel-smoothed version, the population value of the
    smoothed reliability curve of :func:`calbench.metrics.smooth.smooth_reliability` at that
    bandwidth: ``E[K_sigma(t, c) f(c)] / E[K_sigma(t, c)]`` with the reflected Gaussian kernel
    (Blasiok & Nakkiran 2023), the expectations over the confidence distribution linearly
    binned onto a grid of spacing ``sigma / 100`` (at most 1/4000) and smoothed there
    (:func:`~calbench.metrics.smooth.linear_binning`,
    :func:`~calbench.metrics.smooth.reflect_smooth`), then interpolated at ``t``."""
    t = np.asarray(t, dtype=np.float64)
    if sigma is None:
        inside = (t >= 1.0 / model.n_classes) & (t <= 1.0)
        return np.where(inside, model.accuracy_at(np.clip(t, 0.0, 1.0)), np.nan)
    c, w = _grid(model, points)
    intervals = max(4000, int(np.ceil(100.0 / sigma)))
    masses = np.stack(
        [linear_binning(c, w * model.accuracy_at(c), intervals), linear_binning(c, w, intervals)]
    )
    num, den = reflect_smooth(masses, sigma)
    nodes = np.linspace(0.0, 1.0, intervals + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        curve = np.where(den > 1e-300, num / den, np.nan)
    return np.interp(t, nodes, curve)
