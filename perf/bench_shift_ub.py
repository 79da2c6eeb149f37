"""Type-I error and power of the shift comparisons of ``ece_ub`` over a severity's corruptions
(:func:`calbench.shift.ub_compare.ub_mean_test`), on corrupted sets that share their images.

Each simulated test set has ``n`` images; image ``i`` has a latent ``z_i`` and a uniform
``u_i``. On corruption ``c`` its (sharp, calibrated) confidence is
``x_ci = lo_c + (0.94 - lo_c) Phi(rho z_i + sqrt(1 - rho^2) e_ci)`` (uniform on ``[lo_c, 0.94]``,
correlated across corruptions) and the prediction is correct when ``u_i < x_ci`` (the same
``u_i`` on every corruption: correctness is strongly dependent across corruptions, as it is for
copies of one image). Scenarios (two methods on the same images, every corruption):

* ``null sharp/coarse``: the sharp calibrated ``x`` against its calibrated 4-level coarsening
  (the midpoint of ``x``'s quarter of ``[lo_c, 0.94]``): both errors 0;
* ``null over/under``: ``x + delta`` against ``x - delta`` (delta = 0.05, ``lo_c >= 0.3`` so no
  clipping): both 15-bin squared errors exactly ``delta^2`` on every corruption;
* ``power delta``: ``x + delta`` against ``x``: mean error delta against 0.

Prints the rejection rate at alpha = 0.05 with its Monte-Carlo standard error.

    python perf/bench_shift_ub.py [--reps 600] [--n 2000] [--corruptions 5]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.special import ndtr

from calbench.metrics import METRICS
from calbench.shift.ub_compare import ub_mean_test

K = 10
#: highest sharp confidence (x + 0.05 stays below 1: no clipping)
HI = 0.94


def probs_of(conf: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """``(n, K)`` rows with top probability ``conf`` on class 0 (the label) when correct, else
    on another class; the rest spread evenly."""
    n = conf.shape[0]
    p = np.repeat(((1.0 - conf) / (K - 1))[:, None], K, axis=1)
    top = np.where(correct, 0, 1 + np.arange(n) % (K - 1))
    p[np.arange(n), top] = conf
    return p


def one_set(rng, n: int, n_corr: int, scenario: str, rho: float = 0.7):
    z = rng.standard_normal(n)
    u = rng.random(n)
    labels = np.zeros(n, dtype=np.int64)
    jack = METRICS["ece_ub"].jackknife
    a, b = [], []
    for c in range(n_corr):
        lo = 0.3 + 0.4 * c / max(n_corr - 1, 1)
        x = lo + (HI - lo) * ndtr(rho * z + math.sqrt(1 - rho**2) * rng.standard_normal(n))
        correct = u < x
        if scenario == "null sharp/coarse":
            q = np.minimum(np.floor((x - lo) / (HI - lo) * 4), 3)
            ca, cb = x, lo + (HI - lo) * (q + 0.5) / 4
        elif scenario == "null over/under":
            ca, cb = x + 0.05, x - 0.05
        else:
            delta = float(scenario.split()[-1])
            ca, cb = x + delta, x
        a.append(jack(probs_of(ca, correct), labels, np.float64))
        b.append(jack(probs_of(cb, correct), labels, np.float64))
    return ub_mean_test(a, b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=600)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--corruptions", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"n = {args.n} images, {args.corruptions} corruptions sharing them, "
          f"{args.reps} test sets, alpha = 0.05")  # fmt: skip
    print(f"{'scenario':<22} {'reject':>7} {'MC se':>6}")
    for k, scenario in enumerate(
        ("null sharp/coarse", "null over/under", "power 0.02", "power 0.03", "power 0.05")
    ):
        rng = np.random.default_rng([args.seed, k])
        rej = np.mean(
            [one_set(rng, args.n, args.corruptions, scenario)[2] < 0.05 for _ in range(args.reps)]
        )
        se = math.sqrt(max(rej * (1 - rej), 1e-12) / args.reps)
        print(f"{scenario:<22} {rej:7.3f} {se:6.3f}")


if __name__ == "__main__":
    main()
