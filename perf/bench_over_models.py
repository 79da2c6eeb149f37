"""Coverage of the bootstrap intervals over models (:mod:`calbench.stats.over_models`).

A study of ``M`` models gives one value per model (a calibrator's improvement in NLL over
uncalibrated, or its win outcome against another calibrator: 1, 1/2 or 0); the interval of their
mean resamples models. Per cell, ``--studies`` simulated studies draw the ``M`` values from a
population with a known mean and count how often the 95% interval
(:func:`calbench.stats.over_models.coverage`, 1,000 resamples) covers it:

* ``lognormal``: improvements from a lognormal with sigma 0.75 (skewness 3.3: a few models gain
  much), mean ``exp(0.75^2 / 2)``;
* ``gamma``: improvements from a gamma of shape 2 (skewness 1.4), mean 2;
* ``wins``: win outcomes 0, 1/2, 1 with probabilities 0.25, 0.1, 0.65, mean 0.7.

Prints one row per ``M`` (``--models``, 5 10 20 50 200 1000) and column per construction and
population, then the worst cell from 20 models on for each construction. Target: 0.90-0.99 at
``M >= 20`` for the defaults (``studentized`` for improvements, ``bca`` for win rates).

Run: ``python perf/bench_over_models.py [--models 5 20 1000] [--studies 400]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from calbench.stats.over_models import METHODS, coverage

POPULATIONS = {
    "lognormal": (lambda m: lambda g: g.lognormal(0.0, 0.75, m), float(np.exp(0.75**2 / 2))),
    "gamma": (lambda m: lambda g: g.gamma(2.0, 1.0, m), 2.0),
    "wins": (lambda m: lambda g: g.choice([0.0, 0.5, 1.0], size=m, p=[0.25, 0.1, 0.65]), 0.7),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, nargs="+", default=[5, 10, 20, 50, 200, 1000])
    ap.add_argument("--studies", type=int, default=400)
    args = ap.parse_args()
    cols = [(meth, pop) for meth in METHODS for pop in POPULATIONS]
    print(f"95% intervals, {args.studies} studies a cell; columns: method/population")
    print(f"{'M':>5} " + " ".join(f"{m[:5]}/{p[:4]:>4}" for m, p in cols) + "   seconds")
    worst: dict[str, float] = {}
    for m in args.models:
        t0 = time.perf_counter()
        row = []
        for meth, pop in cols:
            make, mean = POPULATIONS[pop]
            cov = coverage(make(m), mean, studies=args.studies, method=meth)
            row.append(cov)
            if m >= 20:
                worst[f"{meth}/{pop}"] = min(worst.get(f"{meth}/{pop}", 1.0), cov)
        took = time.perf_counter() - t0
        print(f"{m:>5} " + " ".join(f"{c:>10.3f}" for c in row) + f"   {took:7.1f}")
    if worst:
        print("worst cell from 20 models on:")
        for key, cov in worst.items():
            print(f"  {key:<22} {cov:.3f} {'in' if 0.90 <= cov <= 0.99 else 'OUT OF'} [0.90, 0.99]")


if __name__ == "__main__":
    main()
