"""Coverage of the bootstrap intervals of calibration errors on models with known errors.

Run: ``python perf/bench_coverage.py [--reps 200] [--resamples 200] [--classes 10,100]``.
For each scenario of :class:`calbench.synthetic.SyntheticModel` (over-confident with a large
ECE, nearly calibrated with a small one, perfectly calibrated with true error 0), number of
classes K and test-set size N, draws ``--reps`` test sets and builds, from one set of bootstrap
resamples per test set (:func:`calbench.stats.bootstrap_values`), the 95% basic (Davison &
Hinkley 1997, eq. 5.6; Kumar, Liang & Ma 2019), percentile (eq. 5.18) and one-sided upper
(``[0, 2t - q_0.05]``) intervals of ECE, classwise ECE and MCE (15 bins). Prints the share of
intervals that contain the population value (:func:`calbench.synthetic.population_errors`),
the share that contain their own plug-in estimate and the mean width, then, per metric and
construction, the worst coverage over all scenarios and whether it lies in [0.90, 0.99]
(an interval that must include 0 covers a true 0 always: the perfectly calibrated scenario
checks only the lower limit). Figures only; nothing is asserted (tests/test_stats.py asserts a
small version). The figures in docs/statistics.md come from this script with its defaults.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from calbench.stats import bootstrap_values, interval_from_values
from calbench.synthetic import SyntheticModel, population_errors

SCENARIOS = {
    "over-confident (gamma 1.6)": 1.6,
    "nearly calibrated (gamma 1.1)": 1.1,
    "calibrated (gamma 1.0)": 1.0,
}
METHODS = ("basic", "percentile", "upper")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--resamples", type=int, default=200)
    ap.add_argument("--sizes", default="500,2000,5000")
    ap.add_argument("--classes", default="10,100")
    ap.add_argument("--metrics", default="ece,cwece,mce")
    ap.add_argument("--scenarios", default=",".join(str(g) for g in SCENARIOS.values()))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    classes = [int(k) for k in args.classes.split(",")]
    metrics = args.metrics.split(",")
    gammas = {float(g) for g in args.scenarios.split(",")}
    print(f"{args.reps} test sets per cell, {args.resamples} resamples, 95% intervals, 15 bins")
    head = "| scenario | K | N | metric | true value, % |"
    head += "".join(f" {m}: coverage |" for m in METHODS)
    head += " basic: contains estimate | basic: mean width, % | upper: mean bound, % |"
    print(head)
    print("|---|---:|---:|---|---:|" + "---:|" * (len(METHODS) + 3))
    worst: dict[tuple[str, str], list[float]] = {}
    t0 = time.perf_counter()
    for label, gamma in SCENARIOS.items():
        if gamma not in gammas:
            continue
        for k in classes:
            model = SyntheticModel(n_classes=k, a=5.0, b=1.5, gamma=gamma)
            truth = population_errors(model)
            for n in sizes:
                rng = np.random.default_rng(n + 7 * k)
                tests = [model.sample(n, rng) for _ in range(args.reps)]
                for name in metrics:
                    cover = dict.fromkeys(METHODS, 0)
                    own = width = upper = 0.0
                    for r, (p, y) in enumerate(tests):
                        est, values = bootstrap_values(name, p, y, args.resamples, seed=r)
                        for method in METHODS:
                            ci = interval_from_values(est, values, 0.95, method)
                            cover[method] += ci.low <= truth[name] <= ci.high
                            if method == "basic":
                                own += ci.contains_estimate
                                width += ci.high - ci.low
                            if method == "upper":
                                upper += ci.high
                    reps = args.reps
                    for method in METHODS:
                        share = cover[method] / reps
                        # a true 0 is covered by any interval that includes 0: only the lower
                        # limit of [0.90, 0.99] applies there
                        key = (name, method)
                        worst.setdefault(key, []).append(
                            share if truth[name] > 1e-12 else min(share, 0.99)
                        )
                    print(
                        f"| {label} | {k} | {n} | {name} | {100 * truth[name]:.2f} |"
                        + "".join(f" {cover[m] / reps:.3f} |" for m in METHODS)
                        + f" {own / reps:.3f} | {100 * width / reps:.2f} | "
                        f"{100 * upper / reps:.2f} |",
                        flush=True,
                    )
    print()
    print("| metric | construction | lowest coverage | highest coverage | within [0.90, 0.99] |")
    print("|---|---|---:|---:|---|")
    for (name, method), shares in worst.items():
        ok = min(shares) >= 0.90 and max(shares) <= 0.99
        print(
            f"| {name} | {method} | {min(shares):.3f} | {max(shares):.3f} | "
            f"{'yes' if ok else 'no'} |"
        )
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
