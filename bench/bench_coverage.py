"""Coverage of the bootstrap intervals of calibration errors on a model with known errors.

Run: ``python bench/bench_coverage.py [--reps 400] [--resamples 200]``.
For each scenario of :class:`calbench.synthetic.SyntheticModel` (over-confident with a large
ECE, mildly over-confident with a small one) and test-set size N, draws ``--reps`` test sets,
computes the 95% basic (Kumar et al. 2019) and percentile bootstrap intervals of ECE,
classwise ECE and MCE (15 bins) and prints the share of intervals that contain the population
value (:func:`calbench.synthetic.population_errors`), the share that contain their own plug-in
estimate, and the mean width. Figures only; nothing is asserted (the test
tests/test_stats.py::test_coverage_of_calibration_error_intervals asserts a small version).
The figures in docs/statistics.md come from this script with its defaults.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from calbench.stats import bootstrap_ci
from calbench.synthetic import SyntheticModel, population_errors

SCENARIOS = {
    "over-confident (gamma 1.6)": SyntheticModel(n_classes=10, a=5.0, b=1.5, gamma=1.6),
    "nearly calibrated (gamma 1.1)": SyntheticModel(n_classes=10, a=5.0, b=1.5, gamma=1.1),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--resamples", type=int, default=200)
    ap.add_argument("--sizes", default="500,2000,5000")
    ap.add_argument("--metrics", default="ece,cwece,mce")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    metrics = args.metrics.split(",")
    print(f"{args.reps} test sets per cell, {args.resamples} resamples, 95% intervals, 15 bins")
    print(
        "| scenario | N | metric | true value, % | basic: coverage | basic: contains estimate"
        " | basic: mean width, % | percentile: coverage | percentile: contains estimate |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    t0 = time.perf_counter()
    for label, model in SCENARIOS.items():
        truth = population_errors(model)
        for n in sizes:
            rng = np.random.default_rng(n)
            tests = [model.sample(n, rng) for _ in range(args.reps)]
            for name in metrics:
                cover = {"basic": 0, "percentile": 0}
                own = {"basic": 0, "percentile": 0}
                width = 0.0
                for r, (p, y) in enumerate(tests):
                    for method in cover:
                        ci = bootstrap_ci(
                            name, p, y, n_resamples=args.resamples, seed=r, method=method
                        )
                        cover[method] += ci.low <= truth[name] <= ci.high
                        own[method] += ci.contains_estimate
                        if method == "basic":
                            width += ci.high - ci.low
                reps = args.reps
                print(
                    f"| {label} | {n} | {name} | {100 * truth[name]:.2f} "
                    f"| {cover['basic'] / reps:.3f} | {own['basic'] / reps:.3f} "
                    f"| {100 * width / reps:.2f} | {cover['percentile'] / reps:.3f} "
                    f"| {own['percentile'] / reps:.3f} |",
                    flush=True,
                )
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
