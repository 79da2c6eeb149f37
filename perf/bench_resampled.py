"""Type-I error of tests over repeated cross-fitting partitions, through real calibrator fits
(:mod:`calbench.stats.resampled`, :mod:`calbench.crossfit`).

The null: two models whose scores are exchangeable (``s = mu (2 y - 1) + noise``, independent
noise of the same law for each model, on the same samples and labels; logits ``[0, c s]`` with
``c = 2``, over-confident), each calibrated by the same built-in calibrator (``platt``: a
2-parameter logistic fit; ``hist``: 15-bin histogram binning, non-parametric). By the symmetry
of the two models the two calibrated predictors have equal population NLL, and their per-sample
NLL terms are paired through the shared labels. Per study: ``N`` samples, ``R`` partitions into
``F = 5`` stratified folds (:func:`calbench.crossfit.fold_assignments`, seed = the study),
out-of-fold probabilities of both (:func:`calbench.crossfit.crossfit_predict`, the same folds),
per-sample NLL differences ``D (R, N)``, and four two-sided tests at level 0.05:

* ``corrected``: :func:`calbench.stats.resampled.corrected_repeated_cv_t` (Bouckaert & Frank
  2004) on the ``R F`` fold-level differences;
* ``folds plain``: a one-sample t-test of the same ``R F`` values as if independent;
* ``pooled plain``: a one-sample t-test of the ``R`` partitions' pooled differences;
* ``paired t``: the paired t-test of the ``N`` per-sample differences of the first partition.

Prints the share of studies each test rejects (target for a valid test: at most ~0.05; with
``--studies`` 300 its binomial standard error is 0.013) and the mean share of the difference's
variance that is between partitions (:func:`calbench.stats.resampled.variance_split`).

Run: ``python perf/bench_resampled.py [--studies 300] [--sizes 200 1000] [--repeats 10]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy import stats as sps

from calbench.calibrators import get_calibrator
from calbench.crossfit import crossfit_predict, fold_assignments
from calbench.stats.resampled import corrected_repeated_cv_t, fold_differences, variance_split

FOLDS = 5


def study(method: str, n: int, repeats: int, seed: int) -> tuple[list[bool], float]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    a = fold_assignments(y, FOLDS, repeats, seed)
    nll = []
    for _ in range(2):  # two exchangeable models
        s = 1.0 * (2 * y - 1) + rng.normal(size=n)
        z = np.stack([np.zeros(n), 2.0 * s], axis=1)
        p = crossfit_predict(lambda: get_calibrator(method), z, y, assignment=a)
        nll.append(-np.log(np.clip(p[:, np.arange(n), y], 1e-12, None)))
    d = nll[0] - nll[1]
    fd = fold_differences(d, a)
    rejects = [
        corrected_repeated_cv_t(fd).p_value < 0.05,
        sps.ttest_1samp(fd.ravel(), 0.0).pvalue < 0.05,
        sps.ttest_1samp(d.mean(axis=1), 0.0).pvalue < 0.05,
        sps.ttest_1samp(d[0], 0.0).pvalue < 0.05,
    ]
    return rejects, variance_split(d).between_share


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--studies", type=int, default=300)
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 1000])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--methods", nargs="+", default=["platt", "hist"])
    args = ap.parse_args()
    warnings.simplefilter("ignore")  # few-sample warnings of the small folds
    print(f"rejection rate at 0.05 under the null, {args.studies} studies, R = {args.repeats}, "
          f"F = {FOLDS}")  # fmt: skip
    print(f"{'method':<8}{'N':>6}{'corrected':>11}{'folds plain':>13}{'pooled plain':>14}"
          f"{'paired t':>10}{'between share':>15}{'s':>7}")  # fmt: skip
    for method in args.methods:
        for n in args.sizes:
            t0 = time.perf_counter()
            res = [study(method, n, args.repeats, s) for s in range(args.studies)]
            rate = np.mean([r for r, _ in res], axis=0)
            share = float(np.nanmean([b for _, b in res]))
            print(f"{method:<8}{n:>6}{rate[0]:>11.3f}{rate[1]:>13.3f}{rate[2]:>14.3f}"
                  f"{rate[3]:>10.3f}{share:>15.3f}{time.perf_counter() - t0:>7.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
