"""Coverage of bootstrap intervals on models with known population values.

Run: ``python perf/bench_coverage.py [--parts ub,errors,shown,bands] [--reps 200]
[--ub-reps 400] [--shown-reps 500] [--band-reps 200]``.
All parts simulate test sets from :class:`calbench.synthetic.SyntheticModel` in three scenarios
(over-confident with a large ECE, nearly calibrated with a small one, perfectly calibrated with
true error 0), for K classes (``--classes``, 10 and 100) and test-set sizes N (``--sizes``, 500,
2000 and 5000), and count how often a 95% interval contains the population value.

**Part "ub": the unbiased squared calibration errors' intervals** (``ece_ub``, ``ece_ub_mass``,
``cwece_ub``; :func:`calbench.stats.ub_interval`, the score interval of the unclipped
U-statistic, and the one-sided upper bound :func:`calbench.stats.ub_upper_bound` behind
"calibrated within delta"). Per cell, ``--ub-reps`` test sets; the population value is the
root of the population squared binned error with the same bins
(:func:`calbench.synthetic.population_errors`; ``cwece_ub`` with its
:func:`calbench.metrics.unbiased.classwise_bins` bins at that N and K). Prints the two-sided
95% interval's coverage, the 95% upper bound's coverage, the mean estimate and mean width, then
per metric the lowest and highest coverage and whether both lie in [0.90, 0.99] (the
one-sided bound's range leaves out the perfectly calibrated scenario, where any upper bound
covers the true 0). Cells where the product gives no interval
(:func:`calbench.metrics.unbiased.cw_thin_reason`) print "no interval".

**Part "errors": calibration errors (no interval in the report).** Draws ``--reps`` test sets
per cell and builds, from one set of bootstrap resamples per test set
(:func:`calbench.stats.bootstrap_values`), the 95% basic (Davison & Hinkley 1997, eq. 5.6;
Kumar, Liang & Ma 2019), percentile (eq. 5.18) and one-sided upper (``[0, 2t - q_0.05]``)
intervals of ECE, classwise ECE and MCE (15 bins). Prints the share of intervals that contain the
population value (:func:`calbench.synthetic.population_errors`), the share that contain their
own plug-in estimate and the mean width, then, per metric and construction, the worst coverage
over all scenarios and whether it lies in [0.90, 0.99] (an interval that must include 0 covers a
true 0 always: the perfectly calibrated scenario checks only the lower limit). This is why the
registry gives these metrics no interval.

**Part "shown": every interval the report shows**, built by the product's own functions with the
study's settings (config.yaml: ``evaluation.n_bootstrap`` 200 and ``compare.n_bootstrap`` 200
resamples, ``evaluation.level`` 0.95, ``evaluation.seed`` 0 for every interval, as the workflow
passes them; ``--resamples``, ``--seed``). Per cell, ``--shown-reps`` repetitions of: a
validation set and a test set of N samples; temperature scaling fitted on the validation set
(the maximum-likelihood temperature, as the ``ts`` calibrator fits it); then

* the metric tables: :func:`calbench.steps.evaluate_rows` on the model's test-set
  probabilities (the registry's construction, percentile), for accuracy, NLL and Brier score and
  their registry variants (``nll_modern``, ``nll_kull``, ``brier_kull``), against
  :func:`calbench.synthetic.population_scores`;
* the paired comparisons: :func:`calbench.stats.comparisons.compare_rows` (paired percentile bootstrap
  of the difference), the interval of the "ts against uncalibrated" row, for NLL and Brier score:
  the model temperature-scaled at the fitted temperature against the model itself, on the same
  test labels; the population difference is that of the two prediction functions, i.e.
  conditional on the fitted temperature (``population_scores(model, T) - population_scores(
  model)``). Temperature scaling keeps every prediction, so its accuracy difference is 0 on
  every sample; accuracy differences use a second pair, the model against a copy that predicts
  another class on a random ``--swap`` share of the samples
  (:func:`calbench.synthetic.variant`);
* the dataset-shift section's intervals of a difference (:mod:`calbench.shift.evaluate`: the
  paired percentile bootstrap over test images of the same resampled indices,
  :func:`calbench.stats.resample_indices`): for the mean metrics they are the paired comparisons'
  intervals above (``tests/shift/test_shift_evaluate.py`` checks they are equal); for ECE, the
  TS-against-uncalibrated difference on one condition (the clean test half, severity 0), through
  :func:`calbench.stats.paired_bootstrap` with the percentile construction the section used and
  the basic one (``2d - q``, the bias-corrected alternative), against
  ``population_errors(model, temperature=T) - population_errors(model)``.

**Part "bands": the reliability diagrams' band.** Every diagram of the report draws the
kernel-smoothed reliability curve with a pointwise bootstrap band
(:func:`calbench.metrics.smooth.smooth_reliability` with the diagrams' settings,
:data:`calbench.plots.reliability.SMOOTH_LEVEL`, ``SMOOTH_BOOTSTRAP`` resamples, seed 0, drawn
where ``n_local`` reaches ``FEW_SAMPLES``; ``--band-level`` and ``--band-resamples`` try
others). Per cell, ``--band-reps`` test sets; at every drawn
point, does the band contain the population value of the smoothed curve at the sample's
bandwidth (:func:`calbench.synthetic.population_reliability` with ``sigma``), and the
unsmoothed reliability curve ``t ** gamma``? Prints the pooled pointwise coverage of both, the
share of diagrams whose band contains the smoothed curve at every drawn point, and the mean
width. (The diagrams' per-bin consistency boxes are the 5-95% range of a *calibrated* model's
frequency, an acceptance region of a test, not an interval for a population value.)

Population values are one-dimensional integrals (midpoint rule on 400,000 cells with exact Beta
weights; the smoothed curve's expectations linearly binned onto a grid at least 100 times finer
than the bandwidth), not Monte-Carlo estimates: their error, below 1e-5, is far below the
coverage's resolution (binomial standard error about 0.01 at 500 repetitions). Prints one table per section,
then per interval and construction the lowest and highest coverage over all cells and whether
both lie in [0.90, 0.99]. Figures only; nothing is asserted (tests/stats/test_stats.py asserts small
versions). The figures in docs/statistics.md come from this script with its defaults.
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


def scenario_models(gammas, classes):
    """``(label, gamma, K, model)`` for each selected scenario of :data:`SCENARIOS` (in order)
    and each number of classes: the grid every simulation below runs over."""
    for label, gamma in SCENARIOS.items():
        if gamma in gammas:
            for k in classes:
                yield label, gamma, k, SyntheticModel(n_classes=k, a=5.0, b=1.5, gamma=gamma)


#: The metric tables' intervals (config.yaml ``evaluation.ci_metrics`` and the other metrics
#: whose registry entry has an interval).
TABLE_METRICS = ("accuracy", "nll", "brier", "nll_modern", "nll_kull", "brier_kull")
#: The paired comparisons' intervals of a difference of means (config.yaml ``compare.metrics``
#: holds NLL and Brier score; accuracy when a configuration adds it).
PAIRED_METRICS = ("nll", "brier")


def fit_temperature(probs: np.ndarray, labels: np.ndarray) -> float:
    """Maximum-likelihood temperature of ``softmax(log probs / T)`` on a sample of
    :class:`~calbench.synthetic.SyntheticModel`, whose rows hold one top value and ``K - 1``
    equal ones: with ``r`` the log-ratio of the two, the NLL of a row is
    ``log(1 + (K - 1) exp(-r / T)) + [label is not the top class] r / T``."""
    from scipy.optimize import minimize_scalar

    k = probs.shape[1]
    top = np.argmax(probs, axis=1)
    c = probs[np.arange(probs.shape[0]), top]
    r = np.log(c) - np.log((1.0 - c) / (k - 1))
    wrong = labels != top

    def nll(t):
        return float(np.mean(np.log1p((k - 1) * np.exp(-r / t)) + wrong * r / t))

    return float(minimize_scalar(nll, bounds=(0.05, 20.0), method="bounded").x)


def calibration_errors(args, sizes, classes, gammas) -> None:
    """Part "errors" (see the module docstring)."""
    metrics = args.metrics.split(",")
    print(f"{args.reps} test sets per cell, {args.resamples} resamples, 95% intervals, 15 bins")
    head = "| scenario | K | N | metric | true value, % |"
    head += "".join(f" {m}: coverage |" for m in METHODS)
    head += " basic: contains estimate | basic: mean width, % | upper: mean bound, % |"
    print(head)
    print("|---|---:|---:|---|---:|" + "---:|" * (len(METHODS) + 3))
    worst: dict[tuple[str, str], list[float]] = {}
    t0 = time.perf_counter()
    for label, _gamma, k, model in scenario_models(gammas, classes):
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


UB_METRICS = ("ece_ub", "ece_ub_mass", "cwece_ub")


def ub_intervals(args, sizes, classes, gammas) -> None:
    """Part "ub" (see the module docstring)."""
    from scipy.special import ndtri

    from calbench.metrics.unbiased import classwise_bins, root, score_bounds
    from calbench.stats import ub_jackknife

    z2, z1 = float(ndtri(0.975)), float(ndtri(0.95))

    reps = args.ub_reps
    print(f"{reps} test sets per cell, 95% intervals (two-sided) and 95% upper bounds")
    print(
        "| scenario | K | N | metric | bins | population value, % | mean estimate, % "
        "| interval coverage | upper-bound coverage | mean width, % |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    worst: dict[tuple[str, str], list[float]] = {}
    t0 = time.perf_counter()
    for label, _gamma, k, model in scenario_models(gammas, classes):
        for n in sizes:
            rng = np.random.default_rng(n + 7 * k)
            tests = [model.sample(n, rng) for _ in range(reps)]
            for name in UB_METRICS:
                bins = classwise_bins(n, k) if name == "cwece_ub" else 15
                truth = population_errors(model, n_bins=bins)[name]
                cover = upper = 0
                est = width = 0.0
                thin = ""
                for p, y in tests:
                    # ub_interval and ub_upper_bound at 0.95 from one jackknife
                    u = ub_jackknife(name, p, y)
                    thin = u.thin
                    est += float(root(u.t))
                    if thin:
                        continue
                    lo, hi = (float(root(b)) for b in score_bounds(u, z2))
                    cover += lo <= truth <= hi
                    upper += truth <= float(root(score_bounds(u, z1)[1]))
                    width += hi - lo
                head = f"| {label} | {k} | {n} | {name} | {bins} | {100 * truth:.3f} "
                head += f"| {100 * est / reps:.3f} "
                if thin:
                    print(head + "| no interval | no bound | – |", flush=True)
                    continue
                worst.setdefault((name, "interval"), []).append(cover / reps)
                if truth > 1e-12:  # an upper bound of an error covers a true 0 always
                    worst.setdefault((name, "upper bound"), []).append(upper / reps)
                print(
                    head + f"| {cover / reps:.3f} | {upper / reps:.3f} "
                    f"| {100 * width / reps:.3f} |",
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


def _fmt(metric: str, value: float) -> str:
    """Percent with 2 decimals for accuracy and ECE, 4 decimals otherwise."""
    if metric in ("accuracy", "ece"):
        return f"{100 * value:.2f}"
    return f"{value:.4f}"


def _row_of(rows, metric: str, method: str) -> dict:
    return next(
        r
        for r in rows
        if r["metric"] == metric and r["method"] == method and r["family"].startswith("vs:")
    )


def simulate_cell(model: SyntheticModel, n: int, reps: int, args, rng) -> dict:
    """Coverage counts and sums of one (scenario, K, N) cell of part "shown"."""
    from calbench.metrics import METRICS
    from calbench.stats import paired_bootstrap
    from calbench.stats.comparisons import compare_rows
    from calbench.steps import evaluate_rows
    from calbench.synthetic import population_scores, variant

    b, level, seed = args.resamples, args.level, args.seed
    truth = population_scores(model)
    err0 = population_errors(model)["ece"]
    swap_truth = population_scores(model, swap=args.swap)["accuracy"] - truth["accuracy"]
    table = {m: METRICS[m] for m in TABLE_METRICS}
    paired = {m: METRICS[m] for m in PAIRED_METRICS}
    out: dict = {"cover": {}, "width": {}, "truth": {}, "bias": {}, "temperature": 0.0}

    def add(key, ci_low, ci_high, true_value, estimate=None):
        out["cover"][key] = out["cover"].get(key, 0) + (ci_low <= true_value <= ci_high)
        out["width"][key] = out["width"].get(key, 0.0) + (ci_high - ci_low)
        out["truth"][key] = out["truth"].get(key, 0.0) + true_value
        if estimate is not None:
            out["bias"][key] = out["bias"].get(key, 0.0) + (estimate - true_value)

    for _ in range(reps):
        p_val, y_val = model.sample(n, rng)
        t = fit_temperature(p_val, y_val)
        out["temperature"] += t
        p, y = model.sample(n, rng)
        p_ts = variant(p, t)
        p_swap = variant(p, 1.0, args.swap, rng)
        halves = {"test": (None, y), "meta": {"dataset": "synthetic", "model": "model"}}
        # the metric tables
        rows = evaluate_rows(
            halves, {"test": p}, "uncalibrated", table, half_names=["test"],
            n_bootstrap=b, level=level, seed=seed, ci_halves=["test"],
            ci_metrics=list(TABLE_METRICS),
        )  # fmt: skip
        for r in rows:
            add(("table", r["metric"], "percentile"), r["ci_low"], r["ci_high"], truth[r["metric"]])
        # the paired comparisons: ts against uncalibrated; the swapped copy for accuracy
        ts_truth = population_scores(model, temperature=t)
        rows = compare_rows(
            halves, {"ts": p_ts, "uncalibrated": p}, paired, ["uncalibrated"],
            n_bootstrap=b, level=level, seed=seed,
        )  # fmt: skip
        for m in PAIRED_METRICS:
            r = _row_of(rows, m, "ts")
            add(("paired", m, "percentile"), r["ci_low"], r["ci_high"], ts_truth[m] - truth[m])
        rows = compare_rows(
            halves, {"swap": p_swap, "model": p}, {"accuracy": METRICS["accuracy"]}, ["model"],
            n_bootstrap=b, level=level, seed=seed,
        )  # fmt: skip
        r = _row_of(rows, "accuracy", "swap")
        add(("paired", "accuracy", "percentile"), r["ci_low"], r["ci_high"], swap_truth)
        # the shift section's ECE difference, severity 0 (one condition)
        d_truth = population_errors(model, temperature=t)["ece"] - err0
        for method in ("percentile", "basic"):
            ci = paired_bootstrap("ece", p_ts, p, y, b, level, seed, method=method)
            add(("shift", "ece", method), ci.low, ci.high, d_truth, ci.difference)
    return out


def shown_intervals(args, sizes, classes, gammas) -> None:
    """Part "shown" (see the module docstring)."""
    reps = args.shown_reps
    print(
        f"{reps} test sets per cell (each with its own validation set for temperature "
        f"scaling), {args.resamples} resamples, {args.level:g} level, seed {args.seed} for "
        f"every interval, swapped share {args.swap:g}"
    )
    t0 = time.perf_counter()
    cells = []
    for label, gamma, k, model in scenario_models(gammas, classes):
        for n in sizes:
            rng = np.random.default_rng([k, n, round(100 * gamma)])
            res = simulate_cell(model, n, reps, args, rng)
            cells.append((label, k, n, res))
            print(f"  {label}, K = {k}, N = {n}: {time.perf_counter() - t0:.0f} s", flush=True)

    def cov(res, key):
        return res["cover"][key] / reps

    def mean(res, part, key):
        return res[part][key] / reps

    print()
    print("Metric tables (calbench.steps.evaluate_rows: percentile interval):")
    print()
    head = "| scenario | K | N |"
    for m in TABLE_METRICS[:3]:
        head += f" {m}: true value{', %' if m == 'accuracy' else ''} | {m}: coverage |"
    head += "".join(f" {m}: coverage |" for m in TABLE_METRICS[3:])
    head += " accuracy: mean width, % | nll: mean width | brier: mean width |"
    print(head)
    print("|---|---:|---:|" + "---:|" * (2 * 3 + len(TABLE_METRICS) - 3 + 3))
    for label, k, n, res in cells:
        line = f"| {label} | {k} | {n} |"
        for m in TABLE_METRICS[:3]:
            key = ("table", m, "percentile")
            line += f" {_fmt(m, mean(res, 'truth', key))} | {cov(res, key):.3f} |"
        line += "".join(f" {cov(res, ('table', m, 'percentile')):.3f} |" for m in TABLE_METRICS[3:])
        line += "".join(
            f" {_fmt(m, mean(res, 'width', ('table', m, 'percentile')))} |"
            for m in ("accuracy", "nll", "brier")
        )
        print(line)
    print()
    print(
        "Paired comparisons (calbench.stats.comparisons.compare_rows: paired percentile interval of "
        "the difference; NLL and Brier: ts against uncalibrated, true value the mean population "
        f"difference over the fitted temperatures; accuracy: a copy with {100 * args.swap:g}% "
        "of the predictions swapped against the model):"
    )
    print()
    head = "| scenario | K | N | mean fitted T |"
    for m in PAIRED_METRICS:
        head += f" {m}: mean true difference | {m}: coverage |"
    head += " accuracy: true difference, points | accuracy: coverage |"
    head += "".join(f" {m}: mean width |" for m in PAIRED_METRICS)
    head += " accuracy: mean width, points |"
    print(head)
    print(
        "|---|---:|---:|---:|" + "---:|" * (2 * len(PAIRED_METRICS) + 2 + len(PAIRED_METRICS) + 1)
    )
    for label, k, n, res in cells:
        line = f"| {label} | {k} | {n} | {res['temperature'] / reps:.3f} |"
        for m in (*PAIRED_METRICS, "accuracy"):
            key = ("paired", m, "percentile")
            line += f" {_fmt(m, mean(res, 'truth', key))} | {cov(res, key):.3f} |"
        line += "".join(
            f" {_fmt(m, mean(res, 'width', ('paired', m, 'percentile')))} |"
            for m in (*PAIRED_METRICS, "accuracy")
        )
        print(line)
    print()
    print(
        "Dataset shift, ECE difference ts - uncalibrated on one condition (severity 0; "
        "calbench.stats.paired_bootstrap with the same resampled indices):"
    )
    print()
    print(
        "| scenario | K | N | mean true difference, points | percentile: coverage | "
        "basic: coverage | mean estimate - true, points | percentile: mean width, points |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, k, n, res in cells:
        pct, bas = ("shift", "ece", "percentile"), ("shift", "ece", "basic")
        print(
            f"| {label} | {k} | {n} | {100 * mean(res, 'truth', pct):+.2f} | "
            f"{cov(res, pct):.3f} | {cov(res, bas):.3f} | "
            f"{100 * mean(res, 'bias', pct):+.2f} | {100 * mean(res, 'width', pct):.2f} |"
        )
    print()
    print(
        "| section | interval | construction | lowest coverage | highest coverage | "
        "within [0.90, 0.99] |"
    )
    print("|---|---|---|---:|---:|---|")
    names = {"table": "metric tables", "paired": "paired comparisons", "shift": "dataset shift"}
    for key in cells[0][3]["cover"]:
        shares = [cov(res, key) for _, _, _, res in cells]
        ok = min(shares) >= 0.90 and max(shares) <= 0.99
        section, metric, method = key
        what = metric if section == "table" else f"difference of {metric}"
        print(
            f"| {names[section]} | {what} | {method} | {min(shares):.3f} | {max(shares):.3f} | "
            f"{'yes' if ok else 'no'} |"
        )
    print(f"{time.perf_counter() - t0:.0f} s")


def smooth_bands(args, sizes, classes, gammas) -> None:
    """Part "bands" (see the module docstring)."""
    from calbench.metrics import top_label
    from calbench.metrics.smooth import smooth_reliability
    from calbench.plots._base import FEW_SAMPLES
    from calbench.plots.reliability import SMOOTH_BOOTSTRAP, SMOOTH_LEVEL, SMOOTH_POINTS
    from calbench.synthetic import population_reliability

    reps = args.band_reps
    level = SMOOTH_LEVEL if args.band_level is None else args.band_level
    resamples = SMOOTH_BOOTSTRAP if args.band_resamples is None else args.band_resamples
    print(
        f"{reps} test sets per cell; the reliability diagrams' smoothed curve and its "
        f"{100 * level:g}% band ({resamples} resamples, seed 0, {SMOOTH_POINTS} "
        f"points, drawn where at least {FEW_SAMPLES} samples lie within a bandwidth)"
    )
    print()
    print(
        "| scenario | K | N | mean bandwidth | points drawn, of "
        f"{SMOOTH_POINTS} | pointwise coverage: smoothed population curve | pointwise "
        "coverage: reliability curve | whole band covers the smoothed curve | mean width |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    t0 = time.perf_counter()
    shares: dict[str, list[float]] = {"smoothed": [], "reliability": []}
    for label, gamma, k, model in scenario_models(gammas, classes):
        for n in sizes:
            rng = np.random.default_rng([k, n, round(100 * gamma), 1])
            drawn = hit = hit_true = whole = 0
            sigma = width = 0.0
            for _ in range(reps):
                conf, correct = top_label(*model.sample(n, rng))
                curve = smooth_reliability(
                    conf, correct, n_points=SMOOTH_POINTS, n_bootstrap=resamples,
                    level=level, seed=0,
                )  # fmt: skip
                lo, hi = curve.lower, curve.upper
                shown = (curve.n_local >= FEW_SAMPLES) & np.isfinite(lo) & np.isfinite(hi)
                target = population_reliability(model, curve.t, curve.sigma)[shown]
                truth = population_reliability(model, curve.t)[shown]
                lo, hi = lo[shown], hi[shown]
                covered = (lo <= target) & (target <= hi)
                drawn += int(shown.sum())
                hit += int(covered.sum())
                hit_true += int(np.sum((lo <= truth) & (truth <= hi)))
                whole += bool(covered.all())
                sigma += curve.sigma
                width += float(np.sum(hi - lo))
            cov, cov_true = hit / max(drawn, 1), hit_true / max(drawn, 1)
            shares["smoothed"].append(cov)
            shares["reliability"].append(cov_true)
            print(
                f"| {label} | {k} | {n} | {sigma / reps:.3f} | {drawn / reps:.0f} | "
                f"{cov:.3f} | {cov_true:.3f} | {whole / reps:.3f} | "
                f"{width / max(drawn, 1):.3f} |",
                flush=True,
            )
    print()
    print("| band | target | lowest coverage | highest coverage | within [0.90, 0.99] |")
    print("|---|---|---:|---:|---|")
    for target, values in shares.items():
        what = "smoothed population curve" if target == "smoothed" else "reliability curve"
        ok = min(values) >= 0.90 and max(values) <= 0.99
        print(
            f"| smoothed curve, {100 * level:g}% pointwise | {what} | {min(values):.3f} | "
            f"{max(values):.3f} | {'yes' if ok else 'no'} |"
        )
    print(f"{time.perf_counter() - t0:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="ub,errors,shown,bands")
    ap.add_argument("--ub-reps", type=int, default=400, help="test sets per cell, part ub")
    ap.add_argument("--reps", type=int, default=200, help="test sets per cell, part errors")
    ap.add_argument("--shown-reps", type=int, default=500, help="test sets per cell, part shown")
    ap.add_argument("--band-reps", type=int, default=200, help="test sets per cell, part bands")
    ap.add_argument("--band-level", type=float, help="part bands (default: the diagrams')")
    ap.add_argument("--band-resamples", type=int, help="part bands (default: the diagrams')")
    ap.add_argument("--resamples", type=int, default=200)
    ap.add_argument("--level", type=float, default=0.95, help="part shown")
    ap.add_argument("--seed", type=int, default=0, help="bootstrap seed, part shown")
    ap.add_argument("--swap", type=float, default=0.05, help="swapped share, part shown")
    ap.add_argument("--sizes", default="500,2000,5000")
    ap.add_argument("--classes", default="10,100")
    ap.add_argument("--metrics", default="ece,cwece,mce", help="part errors")
    ap.add_argument("--scenarios", default=",".join(str(g) for g in SCENARIOS.values()))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    classes = [int(k) for k in args.classes.split(",")]
    gammas = {float(g) for g in args.scenarios.split(",")}
    parts = args.parts.split(",")
    unknown = set(parts) - set(PARTS)
    if unknown:
        ap.error(f"--parts names {sorted(unknown)}; choose from {', '.join(PARTS)}")
    for i, part in enumerate(p for p in PARTS if p in parts):
        if i:
            print()
        PARTS[part](args, sizes, classes, gammas)


#: The parts, in the order they run.
PARTS = {
    "ub": ub_intervals,
    "errors": calibration_errors,
    "shown": shown_intervals,
    "bands": smooth_bands,
}


if __name__ == "__main__":
    main()
