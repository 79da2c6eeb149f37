"""Verdicts over repeated partitions: tests that account for the partitions' overlap, the split of
a difference's variance into partition and test-sample parts, and how often a verdict holds.

With cross-fitting (:mod:`calbench.crossfit`) the ``N`` samples are partitioned ``R`` times into
``F`` folds; every partition gives out-of-fold predictions of all samples, hence per-sample paired
values ``D[r, i]`` (e.g. calibrator A's NLL term minus B's on sample ``i`` in partition ``r``).
The partitions share their samples, so their differences are far from independent: a t-test that
treats the ``R`` (or ``R F``) values as independent is anti-conservative (Dietterich 1998;
Nadeau & Bengio 2003).

* :func:`corrected_resampled_t`: Nadeau & Bengio 2003's corrected resampled t-test (their
  eq. 9 / sec. 5, "corrected resampled t"): ``J`` random train/test splits of ``n_train`` and
  ``n_test`` samples, ``d_j`` the mean test difference of split ``j``; the variance of the mean
  is estimated by ``(1 / J + n_test / n_train) s^2`` instead of ``s^2 / J`` (``s^2`` the sample
  variance of the ``d_j``), ``t = mean(d) / sqrt(that)``, two-sided p from Student's ``t`` with
  ``J - 1`` degrees of freedom. The term ``n_test / n_train`` is their heuristic for the
  correlation ``rho = n_test / (n_train + n_test)`` of two splits' differences
  (``Var(mean) = (1 / J + rho / (1 - rho)) sigma^2``).
* :func:`corrected_repeated_cv_t`: the same correction for ``R`` times repeated ``F``-fold
  cross-validation, Bouckaert & Frank 2004 ("Evaluating the replicability of significance tests
  for comparing learning algorithms", PAKDD), their "corrected repeated k-fold cv test": the
  ``J = R F`` fold-level mean differences ``d_{r,f}``, ``n_test / n_train = 1 / (F - 1)``,
  ``J - 1`` degrees of freedom. This is the test for cross-fitted verdicts: the pooled
  out-of-fold difference of a partition is the size-weighted mean of its fold differences, so the
  test's mean is the cross-fitted difference (averaged over partitions, exactly when folds are
  of equal size); the fold-level values carry the test-sample variation that ``R`` pooled values
  (every one over the same ``N`` samples) do not show, and the correction accounts for the
  overlap of training parts within and across partitions. Its type-I error, simulated
  (tests/stats/test_resampled.py; perf/bench_resampled.py through real fits; docs/statistics.md,
  "Verdicts over repeated partitions"), is 0.04-0.055 at level 0.05 where the plain t-tests of
  the same values reject 15-98% of true nulls; for a non-parametric calibrator (histogram
  binning), whose fits vary much between training parts, it is very conservative (0 of 200).
* :func:`variance_split`: the variance of a difference split into a between-partition part (the
  variance over partitions of each partition's pooled difference: how much the verdict depends
  on the partition drawn) and a within-partition part (each partition's test-sample variance
  ``s_r^2 / N`` of its per-sample paired values, the paired t-test's variance, averaged over
  partitions), as in the law of total variance. The within part ignores the dependence that
  shared training data induces between samples, which Bates, Hastie & Tibshirani 2023 show makes
  such naive cross-validation intervals too narrow; it is a description, not an interval.
* :func:`verdict_share`, :func:`winner_share`: the share of partitions in which a verdict holds
  (a difference significant, a calibrator first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ResampledTest:
    """A two-sided test of a mean difference over resampled splits.

    ``difference``: the mean of the split-level differences; ``statistic``: the corrected ``t``;
    ``df``: its degrees of freedom (``J - 1``); ``n_runs``: ``J``; ``correction``: the
    ``n_test / n_train`` term added to ``1 / J``; ``test``: the test's name."""

    difference: float
    statistic: float
    p_value: float
    df: int
    n_runs: int
    correction: float
    test: str


def _t_test(d: np.ndarray, correction: float, test: str) -> ResampledTest:
    from scipy.special import stdtr  # t.sf(x, df) of scipy.stats is stdtr(df, -x)

    j = d.shape[0]
    mean = float(d.mean())
    var = float(d.var(ddof=1))
    if var == 0.0:  # all differences equal: p = 1 when they are 0, else 0 (as paired_t)
        t = 0.0 if mean == 0.0 else math.copysign(math.inf, mean)
        return ResampledTest(mean, t, 1.0 if mean == 0.0 else 0.0, j - 1, j, correction, test)
    t = mean / math.sqrt((1.0 / j + correction) * var)
    p = float(min(1.0, 2.0 * stdtr(j - 1, -abs(t))))
    return ResampledTest(mean, t, p, j - 1, j, correction, test)


def _finite_1d(values, name: str, least: int) -> np.ndarray:
    d = np.asarray(values, dtype=np.float64)
    if d.ndim != 1 or d.shape[0] < least:
        raise ValueError(f"{name} must be a 1-D array of >= {least} values, got shape {d.shape}")
    if not np.all(np.isfinite(d)):
        raise ValueError(f"{name} holds NaN or infinite values; drop the failed runs first")
    return d


def corrected_resampled_t(differences, n_train: int, n_test: int) -> ResampledTest:
    """Nadeau & Bengio 2003's corrected resampled t-test of ``J`` split-level mean differences
    (``differences``, ``J >= 2``), each from one random split into ``n_train`` fitting and
    ``n_test`` test samples (see the module docstring for the formula)."""
    d = _finite_1d(differences, "differences", 2)
    for name, v in (("n_train", n_train), ("n_test", n_test)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise ValueError(f"{name} must be a positive integer (samples per split), got {v!r}")
    return _t_test(d, n_test / n_train, "corrected_resampled_t")


def fold_differences(per_sample, assignment) -> np.ndarray:
    """Mean of the per-sample paired values ``per_sample`` ``(R, N)`` within each fold of
    ``assignment`` ``(R, N)`` (folds ``0 .. F-1``, the same ``F`` in every partition):
    ``(R, F)``."""
    d = np.asarray(per_sample, dtype=np.float64)
    a = np.asarray(assignment)
    if d.ndim == 1:
        d = d[None, :]
    if a.ndim == 1:
        a = a[None, :]
    if d.shape != a.shape or d.ndim != 2 or not np.issubdtype(a.dtype, np.integer):
        raise ValueError(
            f"per_sample {d.shape} and assignment {a.shape} must both be (R, N), assignment "
            "integer folds; pass crossfit.fold_assignments' output"
        )
    if not np.all(np.isfinite(d)):
        raise ValueError("per_sample holds NaN or infinite values; check the per-sample scores")
    k = int(a.max()) + 1
    if a.min() < 0 or k < 2:
        raise ValueError("assignment must number folds 0 .. F-1 with F >= 2")
    out = np.empty((d.shape[0], k))
    for r in range(d.shape[0]):
        counts = np.bincount(a[r], minlength=k)
        if np.any(counts == 0):
            raise ValueError(f"partition {r} has an empty fold; every partition needs {k} folds")
        out[r] = np.bincount(a[r], weights=d[r], minlength=k) / counts
    return out


def corrected_repeated_cv_t(fold_diffs) -> ResampledTest:
    """Bouckaert & Frank 2004's corrected repeated ``F``-fold cross-validation t-test of the
    fold-level mean differences ``fold_diffs`` ``(R, F)`` (:func:`fold_differences`):
    :func:`corrected_resampled_t`'s formula on the ``J = R F`` values with
    ``n_test / n_train = 1 / (F - 1)``."""
    d = np.asarray(fold_diffs, dtype=np.float64)
    if d.ndim != 2 or d.shape[1] < 2 or d.size < 2:
        raise ValueError(
            f"fold_diffs must be (R, F) fold-level differences with F >= 2, got shape {d.shape}"
        )
    flat = _finite_1d(d.ravel(), "fold_diffs", 2)
    return _t_test(flat, 1.0 / (d.shape[1] - 1), "corrected_repeated_cv_t")


@dataclass(frozen=True)
class VarianceSplit:
    """A difference over ``R`` partitions and its spread.

    ``difference``: mean over partitions of each partition's pooled difference; ``between``:
    their variance over partitions (``ddof=1``); ``within``: the mean over partitions of the
    test-sample variance of a partition's pooled difference, ``var_i(D[r, i]) / N`` (``ddof=1``);
    ``between_share``: ``between / (between + within)`` (NaN when both are 0)."""

    difference: float
    between: float
    within: float
    n_partitions: int

    @property
    def between_share(self) -> float:
        total = self.between + self.within
        return self.between / total if total > 0 else math.nan


def variance_split(per_sample) -> VarianceSplit:
    """Between- and within-partition variance of a difference from its per-sample paired values
    ``per_sample`` ``(R, N)``, ``R >= 2`` partitions of the same ``N`` samples (see the module
    docstring)."""
    d = np.asarray(per_sample, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] < 2 or d.shape[1] < 2:
        raise ValueError(
            f"per_sample must be (R, N) with R >= 2 partitions and N >= 2 samples, got shape "
            f"{d.shape}; repeat the cross-fit (repeats >= 2)"
        )
    if not np.all(np.isfinite(d)):
        raise ValueError("per_sample holds NaN or infinite values; check the per-sample scores")
    pooled = d.mean(axis=1)
    within = float(np.mean(d.var(axis=1, ddof=1) / d.shape[1]))
    return VarianceSplit(float(pooled.mean()), float(pooled.var(ddof=1)), within, d.shape[0])


def verdict_share(holds) -> float:
    """The share of partitions in which a verdict holds: ``holds`` ``(R,)`` booleans (e.g.
    ``p_values < alpha`` for "the difference is significant")."""
    h = np.asarray(holds)
    if h.ndim != 1 or h.size == 0 or h.dtype != bool:
        raise ValueError(f"holds must be a non-empty 1-D boolean array, got {h.dtype} {h.shape}")
    return float(h.mean())


def winner_share(scores, names, *, higher_is_better: bool = False) -> dict[str, float]:
    """Each calibrator's share of first places over partitions: ``scores`` ``(R, C)`` (one row
    per partition, one column per calibrator in ``names``' order). A partition whose best score
    is shared by ``t`` calibrators gives each ``1 / t`` (so the shares sum to 1); a NaN score is
    never first."""
    s = np.asarray(scores, dtype=np.float64)
    names = list(names)
    if s.ndim != 2 or s.shape[1] != len(names) or s.shape[0] == 0:
        raise ValueError(f"scores must be (R, C) with C = {len(names)} names, got shape {s.shape}")
    if len(set(names)) != len(names):
        raise ValueError("names must be distinct")
    x = -s if higher_is_better else s
    x = np.where(np.isnan(x), np.inf, x)
    if np.any(np.all(np.isinf(x) & (x > 0), axis=1)):
        raise ValueError("a partition has no finite score for any calibrator; check the scores")
    first = x == x.min(axis=1, keepdims=True)
    share = (first / first.sum(axis=1, keepdims=True)).mean(axis=0)
    return {n: float(v) for n, v in zip(names, share, strict=True)}
