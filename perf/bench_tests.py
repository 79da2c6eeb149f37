"""Type-I error and power of the paired tests of ``calbench compare`` on simulated pairs.

Run: ``python perf/bench_tests.py [--parts exchangeable,same-sample] [--reps 200] [--n 2000]
[--classes 10] [--ub-reps 400] [--flip-reps 200] [--sizes 2000,5000]``.

**Part "same-sample"** (the nulls a study meets: two calibrators' outputs on the *same*
samples, :func:`calbench.synthetic.variant`). For the unbiased squared errors (``ece_ub``,
``ece_ub_mass``, ``cwece_ub``: jackknife z-test, :func:`calbench.stats.ub_paired_test`) and,
re-measured, the plug-in ECE and classwise ECE (sign-flip test, ``B = 199``):

* **null (i), equal error 0, different sharpness**: a calibrated model (gamma 1) against its
  calibrated 4-level coarsening on the same samples (:func:`coarsen`: each confidence replaced
  by the population mean confidence of its quartile, which is also its accuracy);
* **null (ii), equal non-zero error**: an over-confident model (gamma 1.3) against its
  temperature-scaled version on the other side of calibration (under-confident), the
  temperature solved so both have the same population value of the metric tested;
* **power** (unbiased errors only): a calibrated model (gamma 1) against its sharpened version
  (temperature < 1, solved so the population error is 1, 2, 3 or 5 points).

Prints the rejection rates at alpha = 0.05 with their Monte-Carlo standard error, and for the
plug-in errors how often the coarser predictor has the lower plug-in value.

**Part "exchangeable"** (the earlier table):

Two calibrators' outputs on the *same* test labels are simulated with
:class:`calbench.synthetic.SyntheticModel` (Roelofs et al. 2022, §4): for every sample the label
is drawn first, then each calibrator independently draws its top-label confidence ``c``, is
right with probability ``c ** gamma`` and otherwise puts ``c`` on a uniformly chosen wrong
class. Both calibrators then have the model's population calibration.

* **Null**: both calibrators follow the same model (gamma 1.3): identical population accuracy,
  ECE, classwise ECE, NLL and Brier score; the share of p-values below alpha = 0.05 is the
  type-I error (it should be <= 0.05 up to the simulation's standard error,
  ``sqrt(0.05 * 0.95 / reps)``).
* **Null, different sharpness** (calibration errors only): both calibrators are calibrated
  (gamma 1.0, population ECE and classwise ECE 0) but one is sharper (confidence Beta(5, 1.5)
  against Beta(2, 1)). The sign-flip test's null is exchangeability of the two outputs, which
  fails here although the population errors agree: this row shows how often the test reports
  a difference that is only a difference in the plug-in estimates' bias.
* **Power**: a calibrated model (gamma 1.0) against an over-confident one (gamma 1.3, the same
  confidence distribution Beta(5, 1.5)); the stated effect is the population difference of
  each metric, printed. Power is the share of rejections at alpha and at Holm's first step in
  a family of m = 9 comparisons (p < alpha / 9: the default study's ten calibrators), with the
  sign-flip test's B chosen for that family (:func:`calbench.stats.permutations_for`).

Then prints the smallest attainable Holm-adjusted p-value of each test for the default study's
family sizes, against the previous design (paired bootstrap p-values, B = 1000, Holm over all
the report's comparisons). Figures only, nothing asserted; docs/statistics.md shows them.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from calbench import stats as S
from calbench.synthetic import SyntheticModel, population_errors, variant

UB_METRICS = ("ece_ub", "ece_ub_mass", "cwece_ub")
PLUGIN_METRICS = ("ece", "cwece")

TESTS = {  # metric: the test the registry gives it
    "accuracy": "mcnemar_exact",
    "nll": "paired_t",
    "brier": "paired_t",
    "ece": "sign_flip",
    "cwece": "sign_flip",
}


def pair(model_a: SyntheticModel, model_b: SyntheticModel, n: int, rng):
    """Probabilities of two calibrators and the shared labels (see the module docstring)."""
    k = model_a.n_classes
    y = rng.integers(0, k, size=n)
    out = []
    for model in (model_a, model_b):
        c = 1.0 / k + (1.0 - 1.0 / k) * rng.beta(model.a, model.b, size=n)
        correct = rng.random(n) < model.accuracy_at(c)
        top = np.where(correct, y, (y + rng.integers(1, k, size=n)) % k)
        p = np.repeat(((1.0 - c) / (k - 1))[:, None], k, axis=1)
        p[np.arange(n), top] = c
        out.append(p)
    return out[0], out[1], y


def population(model: SyntheticModel, n_mc: int = 400_000) -> dict:
    """Population accuracy, ECE, cwECE (integrated) and NLL, Brier (Monte Carlo)."""
    rng = np.random.default_rng(0)
    p, _, y = pair(model, model, n_mc, rng)
    from calbench.metrics import METRICS

    out = {m: float(METRICS[m](p, y)) for m in ("accuracy", "nll", "brier")}
    out.update({k: v for k, v in population_errors(model).items() if k in ("ece", "cwece")})
    return out


def coarsen(model: SyntheticModel, probs: np.ndarray, levels: int = 4) -> np.ndarray:
    """The calibrated ``levels``-level coarsening of a calibrated model's probabilities (same
    rows, same top class): the top confidence ``c = 1/K + (1 - 1/K) u`` is replaced by
    ``1/K + (1 - 1/K) E[u | quantile group of u]`` (exact Beta moments), the others by the rest
    spread evenly. With gamma 1 that value is the group's accuracy: calibrated top-label and
    classwise."""
    from scipy.special import betainc
    from scipy.stats import beta

    k, a, b = model.n_classes, model.a, model.b
    qs = beta.ppf(np.linspace(0.0, 1.0, levels + 1), a, b)
    top = np.argmax(probs, axis=1)
    c = probs[np.arange(top.shape[0]), top]
    u = (c - 1.0 / k) / (1.0 - 1.0 / k)
    g = np.clip(np.searchsorted(qs, u, side="right") - 1, 0, levels - 1)
    lo, hi = qs[g], qs[g + 1]
    mass = betainc(a, b, hi) - betainc(a, b, lo)
    mean_u = a / (a + b) * (betainc(a + 1, b, hi) - betainc(a + 1, b, lo)) / mass
    cm = 1.0 / k + (1.0 - 1.0 / k) * mean_u
    out = np.repeat(((1.0 - cm) / (k - 1))[:, None], k, axis=1)
    out[np.arange(top.shape[0]), top] = cm
    return out


def temperature_for(model: SyntheticModel, metric: str, target: float, lo: float, hi: float):
    """The temperature in ``[lo, hi]`` at which the variant's population ``metric`` is
    ``target`` (:func:`calbench.synthetic.population_errors`)."""
    from scipy.optimize import brentq

    def gap(t):
        return population_errors(model, temperature=t, points=100_000)[metric] - target

    return float(brentq(gap, lo, hi, xtol=1e-6))


def _rate(hits: int, reps: int) -> str:
    r = hits / reps
    return f"{r:.3f} ± {np.sqrt(max(r * (1 - r), 0.05 * 0.95) / reps):.3f}"


def _cell(metric, test, reps, alpha, make, label, pops, n, seed) -> None:
    """One row of part "same-sample": ``reps`` test sets of ``make[0]`` against ``make[1]`` of
    their probabilities, on the same labels."""
    rng = np.random.default_rng(seed)
    hits = lower = 0
    for r in range(reps):
        p, y = make[0].sample(n, rng)
        q = make[1](p)
        res = S.paired_test(metric, p, q, y, n_permutations=199, seed=r)
        hits += res.p_value < alpha
        lower += res.difference > 0  # the second (coarser) has the lower value
    coarse = label.startswith("null (i)") and metric in PLUGIN_METRICS
    extra = f" (coarser lower: {lower / reps:.2f})" if coarse else ""
    print(
        f"| {metric} | {test} | {label} | {n} | {pops} | {reps} | {_rate(hits, reps)}{extra} |",
        flush=True,
    )


def same_sample(args) -> None:
    """Part "same-sample" (see the module docstring)."""
    alpha = 0.05
    sizes = [int(v) for v in args.sizes.split(",")]
    k = args.classes
    calibrated = SyntheticModel(n_classes=k, gamma=1.0)
    over = SyntheticModel(n_classes=k, gamma=1.3)
    print(f"K = {k}, alpha = {alpha}; rejection rate ± its Monte-Carlo standard error")
    print("| metric | test | scenario | N | population values, % | reps | rejections |")
    print("|---|---|---|---:|---|---:|---:|")
    for metric in UB_METRICS + PLUGIN_METRICS:
        ub = metric in UB_METRICS
        reps = args.ub_reps if ub else args.flip_reps
        test = "jackknife_z" if ub else "sign_flip (B = 199)"

        def run(make, label, pops, n, seed, metric=metric, reps=reps, test=test):
            _cell(metric, test, reps, alpha, make, label, pops, n, seed)

        truth_over = population_errors(over)[metric]
        t_under = temperature_for(over, metric, truth_over, 1.1, 2.0)
        for n in sizes:
            run(
                (calibrated, lambda p: coarsen(calibrated, p)),
                "null (i): calibrated vs its 4-level coarsening",
                "0 vs 0",
                n,
                n + 1,
            )
            run(
                (over, lambda p, t=t_under: variant(p, temperature=t)),
                f"null (ii): over- vs under-confident (T = {t_under:.3f})",
                f"{truth_over * 100:.2f} vs {truth_over * 100:.2f}",
                n,
                n + 2,
            )
            for points in args.effects if ub else ():  # plug-in errors: nulls only
                t = temperature_for(calibrated, metric, points / 100.0, 0.3, 1.0)
                run(
                    (calibrated, lambda p, t=t: variant(p, temperature=t)),
                    f"power: calibrated vs sharpened (T = {t:.3f})",
                    f"0 vs {points:g}",
                    n,
                    n + 3,
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="same-sample,exchangeable")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--ub-reps", type=int, default=400)
    ap.add_argument("--flip-reps", type=int, default=200)
    ap.add_argument("--sizes", default="2000,5000")
    ap.add_argument("--effects", default="1,2,3,5")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--family", type=int, default=9)
    args = ap.parse_args()
    args.effects = [float(v) for v in args.effects.split(",")]
    parts = args.parts.split(",")
    if "same-sample" in parts:
        t0 = time.perf_counter()
        same_sample(args)
        print(f"{time.perf_counter() - t0:.0f} s")
    if "exchangeable" in parts:
        exchangeable(args)


def exchangeable(args) -> None:
    """Part "exchangeable" (the earlier table; see the module docstring)."""
    alpha, m = 0.05, args.family
    b_family = S.permutations_for(m, alpha)
    null = SyntheticModel(n_classes=args.classes, gamma=1.3)
    calibrated = SyntheticModel(n_classes=args.classes, gamma=1.0)
    t0 = time.perf_counter()
    pop_c, pop_o = population(calibrated), population(null)
    print(
        f"N = {args.n}, K = {args.classes}, {args.reps} simulated test sets per cell, "
        f"alpha = {alpha}, family m = {m}, sign-flip B = {b_family}"
    )
    print(
        "| metric | test | type-I error (null) | type-I error (calibrated, other sharpness) "
        "| effect: calibrated - over-confident "
        "| power at alpha | power at alpha/m (Holm, m = "
        f"{m}) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for metric, test in TESTS.items():
        rng = np.random.default_rng(1)
        rejected = 0
        for r in range(args.reps):
            pa, pb, y = pair(null, null, args.n, rng)
            res = S.paired_test(metric, pa, pb, y, n_permutations=199, seed=r)
            rejected += res.p_value < alpha
        sharp = "–"
        if test == "sign_flip":
            other = SyntheticModel(n_classes=args.classes, a=2.0, b=1.0, gamma=1.0)
            hits = 0
            for r in range(args.reps):
                pa, pb, y = pair(calibrated, other, args.n, rng)
                hits += S.paired_test(metric, pa, pb, y, n_permutations=199, seed=r).p_value < alpha
            sharp = f"{hits / args.reps:.3f}"
        power = power_m = 0
        for r in range(args.reps):
            pa, pb, y = pair(calibrated, null, args.n, rng)
            res = S.paired_test(metric, pa, pb, y, n_permutations=b_family, seed=r)
            power += res.p_value < alpha
            power_m += res.p_value < alpha / m
        effect = pop_c[metric] - pop_o[metric]
        scale = 100.0 if metric in ("accuracy", "ece", "cwece") else 1.0
        unit = " points" if scale == 100.0 else ""
        print(
            f"| {metric} | {test} | {rejected / args.reps:.3f} | {sharp} "
            f"| {effect * scale:+.3f}{unit} "
            f"| {power / args.reps:.3f} | {power_m / args.reps:.3f} |",
            flush=True,
        )
    print()
    print("Smallest attainable Holm-adjusted p-value (alpha = 0.05):")
    print("| design | family size m | smallest p | smallest adjusted p | can reach 0.05 |")
    print("|---|---:|---:|---:|---|")
    rows = [
        ("previous: paired bootstrap, B = 1000, Holm over the report", 111, 2 / 1001),
        (f"sign-flip, B = {b_family}, each family", m, 1 / (b_family + 1)),
        ("McNemar exact, 10 discordant pairs", m, 2 * 0.5**10),
        ("McNemar exact, 6 discordant pairs", m, 2 * 0.5**6),
        ("paired t (N = 5000)", m, 0.0),
    ]
    for label, size, p_min in rows:
        adj = S.min_adjusted_p(p_min, size)
        print(f"| {label} | {size} | {p_min:.2g} | {adj:.3g} | {'yes' if adj <= alpha else 'no'} |")
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
