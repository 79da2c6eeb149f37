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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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


def _grid(model: SyntheticModel, points: int) -> tuple[np.ndarray, np.ndarray]:
    """Midpoints ``c`` and probability weights of the confidence distribution."""
    from scipy.stats import beta

    k = model.n_classes
    u_edges = np.linspace(0.0, 1.0, points + 1)
    w = np.diff(beta.cdf(u_edges, model.a, model.b))
    u = 0.5 * (u_edges[:-1] + u_edges[1:])
    return 1.0 / k + (1.0 - 1.0 / k) * u, w


def _binned(x, weight, conf, target, n_bins) -> tuple[float, float]:
    """Population ``sum_b P(b) |E[target|b] - E[conf|b]|`` and the largest bin gap."""
    from calbench.metrics.binning import width_bin_ids

    ids = width_bin_ids(x, n_bins)
    mass = np.bincount(ids, weights=weight, minlength=n_bins)
    gap = np.bincount(ids, weights=weight * (target - conf), minlength=n_bins)
    used = mass > 0
    return float(np.abs(gap).sum()), float(np.max(np.abs(gap[used] / mass[used])))


def population_errors(model: SyntheticModel, n_bins: int = 15, points: int = 400_000) -> dict:
    """Population top-label ECE, MCE and classwise ECE of ``model`` with ``n_bins`` bins."""
    k = model.n_classes
    c, w = _grid(model, points)
    f = model.accuracy_at(c)
    ece, mce = _binned(c, w, c, f, n_bins)
    # one class j: it is the predicted class with probability 1/K (value c, label prob f(c)),
    # else it holds (1 - c)/(K - 1) with label prob (1 - f(c))/(K - 1)
    q = (1.0 - c) / (k - 1)
    x = np.concatenate([c, q])
    weight = np.concatenate([w / k, w * (k - 1) / k])
    target = np.concatenate([f, (1.0 - f) / (k - 1)])
    cwece, _ = _binned(x, weight, x, target, n_bins)
    return {"ece": ece, "mce": mce, "cwece": cwece}
