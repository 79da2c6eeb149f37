"""The post-hoc calibration protocol on files: fit a calibrator, evaluate it, compare calibrators.

The protocol is the study's (Vasilev 2021, §4-5): calibrators are fitted on the validation half of
a model's test-set logits (:func:`calbench.split.load_halves`) and applied to both halves; every
metric of :data:`calbench.metrics.METRICS` is reported on the test half (and, to show a
calibrator's over-fit, on the validation half), with the bootstrap confidence interval its
registry entry names (``Metric.interval``, :func:`calbench.stats.bootstrap_ci`: percentile for
accuracy, NLL and Brier score; none for the calibration errors, whose simulated coverage missed
90-99%, see :data:`calbench.stats.NO_INTERVAL` and docs/statistics.md). :func:`compare_rows` tests, on the *test*
half, every calibrator against each baseline and the calibrator selected on the *validation*
half against every other one, each family with Holm's correction
(:func:`calbench.stats.paired_test`, :func:`calbench.stats.holm`).

One function per workflow step (rule = ``calbench`` verb = function): :func:`fit_calibrator`
(``fit-calibrator``), :func:`evaluate` (``evaluate``: metrics CSV and, optionally, the
reliability diagram), :func:`compare` (``compare``) and :func:`plot_reliability`
(``plot-reliability``). Heavy libraries (torch, matplotlib) are imported inside the functions
that use them.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from calbench._checks import check_choice
from calbench.calibrators import get_calibrator, load_calibrator, save_calibrator
from calbench.io import file_digest
from calbench.metrics import METRICS
from calbench.plugin_inputs import code_digest as plugin_code_digest
from calbench.report.tables import (
    COMPARE_COLUMNS,  # noqa: F401  (the comparison CSV's columns)
    METRIC_COLUMNS,
    write_long_csv,
)
from calbench.split import HALVES, load_halves


def method_name(calibrator_path, name: str | None = None) -> str:
    """The method label of a calibrator file: ``name`` if given, else the file stem."""
    return name or Path(calibrator_path).stem


def select_metrics(names: list[str] | None) -> dict:
    if names is None:
        return dict(METRICS)
    unknown = [m for m in names if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; choose from {sorted(METRICS)}")
    return {m: METRICS[m] for m in names}


def check_subset(given: list[str] | None, allowed: list[str], flag: str, of: str) -> list[str]:
    """``given`` (``None``: all of ``allowed``) checked to be a subset of ``allowed``."""
    if given is None:
        return list(allowed)
    bad = [g for g in given if g not in allowed]
    if bad:
        raise ValueError(f"{flag} names {bad}, which are not in {of} {list(allowed)}; drop them")
    return given


#: most bootstrap resamples (or sign flips) one call may ask for
MAX_RESAMPLES = 100_000


def check_bootstrap(n: int, level: float) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_RESAMPLES:
        raise ValueError(
            f"--n-bootstrap must be an integer in [0, {MAX_RESAMPLES}] (0 disables intervals), got {n!r}"
        )
    if not 0.0 < level < 1.0:
        raise ValueError(f"--level must lie in (0, 1), e.g. 0.95, got {level}")


def apply_names(halves: dict, dataset: str | None, model: str | None) -> None:
    if dataset:
        halves["meta"]["dataset"] = dataset
    if model:
        halves["meta"]["model"] = model
    for key in ("dataset", "model"):
        if not halves["meta"][key]:
            raise ValueError(f"the logits file records no {key} name; pass --{key} NAME")


def fit_calibrator(
    logits_path, split_path, method: str, params: dict, out, *, allow_probabilities: bool = False
) -> None:
    """Fit calibrator ``method`` (hyperparameters ``params``) on the validation half; save JSON
    recording the logits it was fitted on (order hash and file digest)."""
    cal = get_calibrator(method, **params)  # unknown params fail before the logits are read
    halves = load_halves(logits_path, split_path)
    cal.fit(*halves["val"], allow_probabilities=allow_probabilities)
    cal.set_fitted_on(halves["meta"]["order_hash"], halves["meta"]["logits_sha256"])
    save_calibrator(cal, out)


def load_checked_calibrator(path, halves: dict, allow_other_logits: bool = False):
    """:func:`calbench.calibrators.load_calibrator`, refusing a calibrator that records being
    fitted on other logits than ``halves`` (unless ``allow_other_logits``)."""
    cal = load_calibrator(path)
    if not allow_other_logits:
        meta = halves["meta"]
        cal.check_fitted_on(meta["order_hash"], meta["logits_sha256"], where=str(path))
    return cal


def evaluate_rows(
    halves: dict,
    probs_by_half: dict[str, np.ndarray],
    method: str,
    metrics: dict,
    *,
    half_names=HALVES,
    n_bootstrap: int = 200,
    level: float = 0.95,
    seed: int = 0,
    ci_halves=None,
    ci_metrics=None,
) -> list[dict]:
    """Long-format rows ``dataset,model,method,half,metric,value,ci_low,ci_high`` for one calibrator.

    Every metric of ``metrics`` is computed on every half of ``half_names``, from the
    calibrated probabilities of that half (``probs_by_half[half]``). The bootstrap
    interval (:func:`calbench.stats.bootstrap_ci` with the registry's construction,
    ``Metric.interval``; ``n_bootstrap`` resamples of the half's samples,
    confidence ``level``, ``seed``) is computed for the halves in ``ci_halves`` and the metrics
    in ``ci_metrics`` (``None``: all of them) except those whose registry entry has no interval
    (``Metric.interval is None``, :data:`calbench.stats.NO_INTERVAL`: the calibration errors);
    other rows carry NaN bounds, as do all rows when ``n_bootstrap`` is 0.
    """
    from calbench.stats import bootstrap_ci, interval_method  # lazy: code inputs

    ci_halves = set(half_names if ci_halves is None else ci_halves)
    ci_metrics = set(metrics if ci_metrics is None else ci_metrics)
    rows = []
    for half in half_names:
        _, y = halves[half]
        probs = probs_by_half[half]
        for name, fn in metrics.items():
            value = float(fn(probs, y))
            lo = hi = float("nan")
            has_ci = interval_method(fn) is not None
            if n_bootstrap > 0 and half in ci_halves and name in ci_metrics and has_ci:
                res = bootstrap_ci(fn, probs, y, n_resamples=n_bootstrap, level=level, seed=seed)
                lo, hi = float(res.low), float(res.high)
            rows.append(
                {
                    "dataset": halves["meta"]["dataset"],
                    "model": halves["meta"]["model"],
                    "method": method,
                    "half": half,
                    "metric": name,
                    "value": value,
                    "ci_low": lo,
                    "ci_high": hi,
                }
            )
    return rows


def comparison_pairs(
    methods: list[str], baselines: list[str], best: str
) -> list[tuple[str, str, str]]:
    """The comparison families of one (dataset, model, metric) as ``(family, method, baseline)``.

    For each baseline ``b``: family ``vs:b``, every other method against ``b`` (does a
    calibrator improve on no calibration, on temperature scaling?); family ``best``: the
    validation-selected ``best`` against every other method (is the winner really better?).
    Holm's correction runs within each family (:func:`compare_rows`).
    """
    out = [(f"vs:{b}", m, b) for b in baselines for m in methods if m != b]
    out += [("best", best, m) for m in methods if m != best]
    return out


def compare_rows(
    halves: dict,
    probs_by_method: dict[str, np.ndarray],
    metrics: dict,
    baselines: list[str],
    *,
    val_probs_by_method: dict[str, np.ndarray] | None = None,
    n_bootstrap: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> list[dict]:
    """Paired tests of the calibrators of one model on the test half, in families.

    Per metric, the families of :func:`comparison_pairs`: each method against each baseline
    (``family = "vs:<baseline>"``) and the best method against every other one
    (``family = "best"``). The best method is selected on the **validation** half
    (``val_probs_by_method``; the calibrators were fitted there too), so the test half that
    measures the difference plays no part in picking the winner: the best value by the metric's
    direction (``Metric.higher_is_better``), ties to the first in ``probs_by_method`` order.
    Without validation probabilities the test half selects (``selected_on = "test"``, an
    optimistic comparison).

    ``difference = metric(method) - metric(baseline)`` on the test half. Its p-value comes from
    the metric's paired test (:func:`calbench.stats.paired_test`: McNemar's exact test for
    accuracy, the paired t-test for NLL and Brier score, the sign-flip test for calibration
    errors with ``B = max(n_bootstrap, permutations_for(m, 1 - level))`` flips, so that
    ``m / (B + 1)`` is four times below ``alpha = 1 - level``); ``p_holm`` is Holm's (1979)
    adjustment within the family of ``family_size = m`` comparisons and ``min_p_holm`` the
    smallest adjusted p-value the test could reach on these samples: above ``alpha`` the
    comparison cannot be significant whatever the data. The interval of the difference is the
    paired percentile bootstrap (``n_bootstrap`` resamples, the same resampled test indices for
    both methods) for metrics with a percentile interval (means: accuracy, NLL, Brier score);
    differences of calibration errors get none (``interval = "none"``).
    """
    from calbench.stats import (  # lazy: code inputs
        holm,
        interval_method,
        min_adjusted_p,
        paired_bootstrap,
        paired_test,
        permutations_for,
    )

    _, y = halves["test"]
    missing = [b for b in baselines if b not in probs_by_method]
    if missing:
        raise ValueError(
            f"baselines {missing} are not among the calibrators {list(probs_by_method)}; "
            "pass their JSON files or drop them from --baselines"
        )
    if val_probs_by_method is not None and set(val_probs_by_method) != set(probs_by_method):
        raise ValueError("validation and test probabilities must cover the same calibrators")
    alpha = 1.0 - level
    methods = list(probs_by_method)
    rows = []
    for name, fn in metrics.items():
        values = {m: float(fn(p, y)) for m, p in probs_by_method.items()}
        if val_probs_by_method is not None:
            _, y_val = halves["val"]
            chosen = {m: float(fn(val_probs_by_method[m], y_val)) for m in probs_by_method}
            selected_on = "val"
        else:
            chosen, selected_on = values, "test"
        higher = bool(getattr(fn, "higher_is_better", False))
        pick = max if higher else min
        worst = -math.inf if higher else math.inf
        best = pick(chosen, key=lambda m: chosen[m] if math.isfinite(chosen[m]) else worst)
        pairs = comparison_pairs(methods, list(baselines), best)
        sizes: dict[str, int] = {}
        for family, _, _ in pairs:
            sizes[family] = sizes.get(family, 0) + 1
        # the difference gets the paired percentile interval when the metric is a mean of
        # per-sample values; a difference of biased plug-in errors gets none (its coverage is
        # not verified): the test carries the evidence
        method_ci = "percentile" if interval_method(fn) == "percentile" else None
        done: dict[tuple[str, str], tuple] = {}
        metric_rows = []
        for family, a, b in pairs:
            m = sizes[family]
            n_perm = max(n_bootstrap, permutations_for(m, alpha))
            key = (a, b, n_perm)
            if key not in done:
                rev = done.get((b, a, n_perm))
                if rev is not None:  # the reversed pair: same p-value, negated difference
                    t, lo, hi = rev
                    done[key] = (t, -hi, -lo)
                else:
                    t = paired_test(
                        fn,
                        probs_by_method[a],
                        probs_by_method[b],
                        y,
                        n_permutations=n_perm,
                        seed=seed,
                    )
                    lo = hi = float("nan")
                    if method_ci is not None:
                        ci = paired_bootstrap(
                            fn,
                            probs_by_method[a],
                            probs_by_method[b],
                            y,
                            n_resamples=n_bootstrap,
                            level=level,
                            seed=seed,
                            method=method_ci,
                        )
                        lo, hi = float(ci.low), float(ci.high)
                    done[key] = (t, lo, hi)
            t, lo, hi = done[key]
            metric_rows.append(
                {
                    "dataset": halves["meta"]["dataset"],
                    "model": halves["meta"]["model"],
                    "half": "test",
                    "metric": name,
                    "method": a,
                    "baseline": b,
                    "value": values[a],
                    "baseline_value": values[b],
                    "difference": values[a] - values[b],
                    "ci_low": lo,
                    "ci_high": hi,
                    "p_value": float(t.p_value),
                    "n_resamples": n_bootstrap,
                    "interval": method_ci or "none",
                    "selected_on": selected_on if family == "best" else "",
                    "family": family,
                    "family_size": m,
                    "test": t.test,
                    "n_permutations": t.n_permutations,
                    "p_holm": float("nan"),
                    "min_p_holm": min_adjusted_p(t.min_p, m),
                    "alpha": alpha,
                }
            )
        for family in sizes:
            members = [r for r in metric_rows if r["family"] == family]
            for r, p in zip(members, holm([r["p_value"] for r in members]), strict=True):
                r["p_holm"] = float(p)
        rows += metric_rows
    return rows


# --------------------------------------------------------------------------------------------
# the steps, file in, file out
# --------------------------------------------------------------------------------------------
def evaluate(
    logits_path,
    split_path,
    calibrator_path,
    out,
    *,
    metrics: list[str] | None = None,
    halves: list[str] | None = None,
    n_bootstrap: int = 200,
    level: float = 0.95,
    seed: int = 0,
    ci_halves: list[str] | None = None,
    ci_metrics: list[str] | None = None,
    dataset: str | None = None,
    model: str | None = None,
    name: str | None = None,
    allow_other_logits: bool = False,
    plot=None,
    plot_options: dict | None = None,
) -> None:
    """Every metric of one fitted calibrator on both halves -> long-format CSV ``out``
    (:func:`evaluate_rows`); with ``plot``, also its reliability diagram on the test half
    (:func:`calbench.plots.reliability_diagram` with ``plot_options``: ``n_bins``, ``style``,
    ``title``, ``dpi``), the same figure ``calbench plot-reliability`` draws. Every argument is
    checked before anything is written."""
    check_bootstrap(n_bootstrap, level)
    half_names = halves or list(HALVES)
    bad = [h for h in half_names if h not in HALVES]
    if bad:
        raise ValueError(f"--halves must name test and/or val, got {bad}")
    chosen = select_metrics(metrics)
    ci_halves = check_subset(ci_halves, half_names, "--ci-halves", "--halves")
    ci_metrics = check_subset(ci_metrics, list(chosen), "--ci-metrics", "--metrics")
    plot_options = dict(plot_options or {})
    if plot is not None:
        _check_plot_options(plot_options)
    data = load_halves(logits_path, split_path)
    apply_names(data, dataset, model)
    cal = load_checked_calibrator(calibrator_path, data, allow_other_logits)
    label = method_name(calibrator_path, name)
    # each half calibrated once: the metrics and, with ``plot``, the test half's diagram use them
    wanted = [*half_names, *(["test"] if plot is not None else [])]
    probs = {half: cal.predict_proba(data[half][0]) for half in dict.fromkeys(wanted)}
    rows = evaluate_rows(
        data,
        probs,
        label,
        chosen,
        half_names=half_names,
        n_bootstrap=n_bootstrap,
        level=level,
        seed=seed,
        ci_halves=ci_halves,
        ci_metrics=ci_metrics,
    )
    if plot is None:
        write_long_csv(out, rows, METRIC_COLUMNS)
        return
    _draw({label: probs["test"]}, data["test"][1], plot, grid=False, **plot_options)
    try:
        write_long_csv(out, rows, METRIC_COLUMNS)
    except BaseException:
        Path(plot).unlink(missing_ok=True)  # no partial output: both files or neither
        raise


#: reliability-diagram options of :func:`evaluate` and :func:`plot_reliability`
PLOT_OPTIONS = ("n_bins", "style", "title", "dpi")


def _check_plot_options(options: dict) -> None:
    from calbench.plots import STYLES  # lazy: code inputs

    unknown = sorted(set(options) - set(PLOT_OPTIONS))
    if unknown:
        raise ValueError(f"unknown plot options {unknown}; choose from {list(PLOT_OPTIONS)}")
    check_choice(options.get("style", "guo"), "style", STYLES)


def _draw(probs: dict, labels, out, *, grid: bool, n_bins=10, style="guo", title=None, dpi=100):
    from calbench import plots  # lazy: code inputs

    if grid:
        fig = plots.reliability_grid(probs, labels, n_bins=n_bins, style=style, title=title)
    else:
        ((name, p),) = probs.items()
        fig = plots.reliability_diagram(p, labels, n_bins=n_bins, style=style, title=title or name)
    plots.save_figure(fig, out, dpi=dpi)


def plot_reliability(
    logits_path,
    split_path,
    calibrator_paths: list,
    out,
    *,
    grid: bool = False,
    half: str = "test",
    allow_other_logits: bool = False,
    **plot_options,
) -> None:
    """Reliability diagram of one calibrator (or, with ``grid``, one panel per calibrator) on
    one half of a model's logits -> image ``out`` (.png, .pdf, .svg)."""
    if half not in HALVES:
        raise ValueError(f"--half must be test or val, got {half!r}")
    if not grid and len(calibrator_paths) != 1:
        raise ValueError(
            "plot-reliability draws one calibrator per figure; pass --grid for several"
        )
    _check_plot_options(plot_options)
    data = load_halves(logits_path, split_path)
    z, y = data[half]
    probs = {}
    for path in calibrator_paths:
        cal = load_checked_calibrator(path, data, allow_other_logits)
        probs[method_name(path)] = cal.predict_proba(z)
    _draw(probs, y, out, grid=grid, **plot_options)


def compare(
    logits_path,
    split_path,
    calibrator_paths: list,
    out,
    *,
    metrics: list[str] | None = None,
    baselines: list[str] = (),
    n_bootstrap: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    dataset: str | None = None,
    model: str | None = None,
    allow_other_logits: bool = False,
) -> None:
    """Paired comparisons of one model's calibrators (:func:`compare_rows`) -> CSV ``out``;
    method names are the calibrator file stems."""
    check_bootstrap(n_bootstrap, level)
    if n_bootstrap < 1:
        raise ValueError("--n-bootstrap must be >= 1 for compare")
    chosen = select_metrics(metrics)
    data = load_halves(logits_path, split_path)
    apply_names(data, dataset, model)
    z, _ = data["test"]
    z_val, _ = data["val"]
    probs, val_probs = {}, {}
    for path in calibrator_paths:
        name = method_name(path)
        if name in probs:
            raise ValueError(f"two calibrator files are named {name!r}; give each method one file")
        cal = load_checked_calibrator(path, data, allow_other_logits)
        probs[name] = cal.predict_proba(z)
        val_probs[name] = cal.predict_proba(z_val)
    rows = compare_rows(
        data,
        probs,
        chosen,
        list(baselines),
        val_probs_by_method=val_probs,
        n_bootstrap=n_bootstrap,
        level=level,
        seed=seed,
    )
    write_long_csv(out, rows, COMPARE_COLUMNS)


# --------------------------------------------------------------------------------------------
# one model, every calibrator: the workflow's calibration step
# --------------------------------------------------------------------------------------------
#: keys of the ``calibrate`` spec (a JSON file the workflow writes from the config) and of its
#: sections; every key is required, so a spec written by another version fails here, by name
CALIBRATE_SPEC = {
    "calibrators": None,  # {key: {"method": str, "params": {...}, "display": str}}
    "evaluation": ("metrics", "halves", "n_bootstrap", "level", "seed", "ci_halves", "ci_metrics"),
    "compare": ("metrics", "baselines", "n_bootstrap"),
    "plots": ("n_bins", "style"),
}
_CALIBRATOR_KEYS = {"method", "params", "display"}


def check_calibrate_spec(spec: dict) -> dict:
    """The ``calibrate`` spec checked for missing and unknown keys (one error naming them)."""
    if not isinstance(spec, dict):
        raise ValueError(f"the calibrate spec must be a JSON object, got {type(spec).__name__}")
    problems = []
    for section, keys in CALIBRATE_SPEC.items():
        if section not in spec:
            problems.append(f"missing section {section!r}")
        elif keys is not None:
            have = set(spec[section])
            problems += [f"{section}: missing key {k!r}" for k in keys if k not in have]
            problems += [f"{section}: unknown key {k!r}" for k in sorted(have - set(keys))]
    problems += [f"unknown section {k!r}" for k in sorted(set(spec) - set(CALIBRATE_SPEC))]
    cals = spec.get("calibrators")
    if not problems:
        if not isinstance(cals, dict) or not cals:
            problems.append("calibrators must map at least one key to its entry")
        else:
            for key, entry in cals.items():
                bad = sorted(set(entry) - _CALIBRATOR_KEYS) if isinstance(entry, dict) else None
                if bad is None or bad or "method" not in entry:
                    problems.append(
                        f"calibrators.{key} must be an object with 'method' and optional "
                        f"'params', 'display' (got {entry!r})"
                    )
    if problems:
        raise ValueError(
            "invalid calibrate spec: " + "; ".join(problems) + " (write it with the workflow's "
            "common.smk calibrate_spec(), or by hand with these keys)"
        )
    return spec


def calibrate(
    logits_path,
    split_path,
    spec: dict,
    *,
    calibrators_dir,
    metrics_dir,
    plots_dir,
    compare_out,
    robustness_out=None,
    dataset: str | None = None,
    model: str | None = None,
    reuse_dir=None,
) -> list[Path]:
    """Every configured calibrator of one model, in one process: the workflow's calibration step.

    For each entry ``key`` of ``spec["calibrators"]`` (in order): fit ``method`` with ``params``
    on the validation half (:func:`fit_calibrator`'s protocol) -> ``calibrators_dir/key.json``;
    its metrics on both halves (:func:`evaluate_rows`, ``spec["evaluation"]``) ->
    ``metrics_dir/key.csv``; its reliability diagram on the test half -> ``plots_dir/key.png``.
    Then the paired comparisons (:func:`compare_rows`, ``spec["compare"]``) -> ``compare_out``
    and the grid of every calibrator's diagram -> ``plots_dir/grid.png``; with ``robustness_out``
    the calibrators' ranks under other ECE variants and their
    bootstrap first-place probabilities (:func:`calbench.robustness.robustness_rows`,
    ``evaluation.n_bootstrap`` resamples, ``evaluation.seed``) -> that CSV. Each file equals what
    the single-step verbs (``fit-calibrator``, ``evaluate``, ``compare``, ``plot-reliability
    --grid``) write from the same inputs; the predictions come from the calibrator as saved, so
    the JSON is what every downstream step reads.

    One process per model instead of one per (model, calibrator) and step: the interpreter and
    library imports (~1.5 s) are paid once per model. An error names the calibrator; on any
    error every file written so far is removed (no partial output). Returns the written paths.

    ``reuse_dir``: a folder of copies of each calibrator's three files under a digest of
    everything they depend on (:func:`reuse_digest`: the calibrator's entry, the evaluation and
    plot settings, the logits, the split, the dataset and model names, the library's source and
    the versions of the numeric libraries). A calibrator whose digest has a copy is not refitted:
    its files are copied back (the bytes a refit would write, since every step is
    deterministic) and its predictions are recomputed from its JSON for the comparisons, the
    grid and the ranks. Adding a calibrator to the study then fits only the new one.
    """
    spec = check_calibrate_spec(spec)
    ev, cmp, plot = spec["evaluation"], spec["compare"], dict(spec["plots"])
    check_bootstrap(ev["n_bootstrap"], ev["level"])
    check_bootstrap(cmp["n_bootstrap"], ev["level"])
    if cmp["n_bootstrap"] < 1:
        raise ValueError("compare.n_bootstrap must be >= 1")
    half_names = list(ev["halves"] or HALVES)
    bad = [h for h in half_names if h not in HALVES]
    if bad or "test" not in half_names:
        raise ValueError(f"evaluation.halves must name test (and optionally val), got {half_names}")
    chosen = select_metrics(ev["metrics"])
    compared = select_metrics(cmp["metrics"])
    ci_halves = check_subset(ev["ci_halves"], half_names, "evaluation.ci_halves", "halves")
    ci_metrics = check_subset(ev["ci_metrics"], list(chosen), "evaluation.ci_metrics", "metrics")
    _check_plot_options(plot)
    calibrators = spec["calibrators"]
    for base in cmp["baselines"]:
        if base not in calibrators:
            raise ValueError(f"compare.baselines names {base!r}, which is not a calibrator key")
    # every calibrator constructed before any work: an unknown method or parameter fails first
    fitters = {}
    for key, entry in calibrators.items():
        try:
            fitters[key] = get_calibrator(entry["method"], **(entry.get("params") or {}))
        except ValueError as exc:
            raise ValueError(f"calibrator {key!r} (method {entry['method']!r}): {exc}") from None

    data = load_halves(logits_path, split_path)
    apply_names(data, dataset, model)
    meta = data["meta"]
    dirs = {"cal": Path(calibrators_dir), "met": Path(metrics_dir), "plot": Path(plots_dir)}
    written: list[Path] = []
    try:
        test_probs, val_probs = {}, {}
        reuse = None if reuse_dir is None else _Reuse(reuse_dir, spec, data, split_path)
        for key, cal in fitters.items():
            path, csv, png = paths = (
                dirs["cal"] / f"{key}.json",
                dirs["met"] / f"{key}.csv",
                dirs["plot"] / f"{key}.png",
            )
            if reuse is not None and reuse.restore(key, paths):
                try:
                    saved = load_checked_calibrator(path, data)
                    test_probs[key], val_probs[key] = (
                        saved.predict_proba(data[h][0]) for h in ("test", "val")
                    )
                except (ValueError, OSError):  # a kept file that does not load: refit
                    reuse.forget(key, paths)
                else:
                    written += paths
                    continue
            try:
                cal.fit(*data["val"])
                cal.set_fitted_on(meta["order_hash"], meta["logits_sha256"])
                save_calibrator(cal, path)
                written.append(path)
                saved = load_checked_calibrator(path, data)
                probs = {
                    h: saved.predict_proba(data[h][0]) for h in dict.fromkeys([*half_names, "val"])
                }
                rows = evaluate_rows(
                    data,
                    probs,
                    key,
                    chosen,
                    half_names=half_names,
                    n_bootstrap=ev["n_bootstrap"],
                    level=ev["level"],
                    seed=ev["seed"],
                    ci_halves=ci_halves,
                    ci_metrics=ci_metrics,
                )
                title = str(calibrators[key].get("display") or key)
                _draw({key: probs["test"]}, data["test"][1], png, grid=False, title=title, **plot)
                written.append(png)
                write_long_csv(csv, rows, METRIC_COLUMNS)
                written.append(csv)
            except ValueError as exc:
                raise ValueError(
                    f"calibrator {key!r} (method {calibrators[key]['method']!r}): {exc}"
                ) from None
            if reuse is not None:
                reuse.store(key, paths)
            test_probs[key], val_probs[key] = probs["test"], probs["val"]
        rows = compare_rows(
            data,
            test_probs,
            compared,
            list(cmp["baselines"]),
            val_probs_by_method=val_probs,
            n_bootstrap=cmp["n_bootstrap"],
            level=ev["level"],
            seed=ev["seed"],
        )
        write_long_csv(compare_out, rows, COMPARE_COLUMNS)
        written.append(Path(compare_out))
        grid = dirs["plot"] / "grid.png"
        _draw(test_probs, data["test"][1], grid, grid=True, **plot)
        written.append(grid)
        if robustness_out is not None:
            from calbench.robustness import ROBUSTNESS_COLUMNS, robustness_rows  # lazy: code inputs

            rows = robustness_rows(
                test_probs,
                data["test"][1],
                dataset=meta["dataset"],
                model=meta["model"],
                n_resamples=ev["n_bootstrap"],
                seed=ev["seed"],
            )
            write_long_csv(robustness_out, rows, ROBUSTNESS_COLUMNS)
            written.append(Path(robustness_out))
        if reuse is not None:
            reuse.prune()
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return written


# --------------------------------------------------------------------------------------------
# reuse of unchanged calibrators inside ``calibrate``
# --------------------------------------------------------------------------------------------
#: the numeric libraries whose versions a calibrator's files may depend on
_NUMERIC_LIBRARIES = ("numpy", "scipy", "torch", "matplotlib", "scikit-learn")


def _code_digest() -> str:
    """sha256 over every source file of the calbench package and the versions of
    :data:`_NUMERIC_LIBRARIES`: any edit to the library invalidates every reused file."""
    from importlib import metadata

    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for name in _NUMERIC_LIBRARIES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "absent"
        h.update(f"{name}={version}\0".encode())
    return h.hexdigest()


def reuse_digest(key: str, spec: dict, meta: dict, split_digest: str, code_digest: str) -> str:
    """The digest under which :func:`calibrate` keeps calibrator ``key``'s files: everything
    its JSON, metrics CSV and diagram depend on (the spec's entry for ``key``, its evaluation and
    plot sections, the logits and their order, the split file, the names in the CSV, the
    library's code and the numeric libraries' versions, the thread setting)."""
    record = {
        "key": key,
        "entry": spec["calibrators"][key],
        "evaluation": spec["evaluation"],
        "plots": spec["plots"],
        "logits": [meta["logits_sha256"], meta["order_hash"]],
        "names": [meta["dataset"], meta["model"]],
        "split": split_digest,
        "code": code_digest,
        "threads": os.environ.get("OMP_NUM_THREADS"),
    }
    # a plug-in's code (the calibrator's, the evaluated metrics') is not calbench's: its digest
    plugins = plugin_code_digest(
        [record["entry"]["method"]], spec["evaluation"].get("metrics") or list(METRICS)
    )
    if plugins:
        record["plugins"] = plugins
    text = json.dumps(record, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class _Reuse:
    """``reuse_dir/<key>/<digest>/`` holds the three files of calibrator ``key`` as last
    computed with that digest (:func:`reuse_digest`); a folder appears complete or not at all
    (written under a temporary name, then renamed), older digests of a key are removed, and so
    are the folders of keys no longer in the spec once a run succeeds."""

    NAMES = ("calibrator.json", "metrics.csv", "diagram.png")

    def __init__(self, reuse_dir, spec: dict, data: dict, split_path) -> None:
        self.root = Path(reuse_dir)
        self.digests = {}
        split_digest, code = file_digest(split_path), _code_digest()
        for key in spec["calibrators"]:
            self.digests[key] = reuse_digest(key, spec, data["meta"], split_digest, code)

    def restore(self, key: str, paths) -> bool:
        """Copy ``key``'s kept files to ``paths`` (JSON, CSV, PNG); ``False`` if none are kept."""
        folder = self.root / key / self.digests[key]
        kept = [folder / name for name in self.NAMES]
        if not all(f.is_file() for f in kept):
            return False
        for src, dst in zip(kept, paths, strict=True):
            Path(dst).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
        return True

    def forget(self, key: str, paths) -> None:
        """Drop ``key``'s kept folder and the files :meth:`restore` copied to ``paths``."""
        for path in paths:
            Path(path).unlink(missing_ok=True)
        shutil.rmtree(self.root / key / self.digests[key], ignore_errors=True)

    def store(self, key: str, paths) -> None:
        """Keep copies of ``key``'s freshly written files (JSON, CSV, PNG) under its digest."""
        base = self.root / key
        base.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=base))
        try:
            for src, name in zip(paths, self.NAMES, strict=True):
                shutil.copyfile(src, tmp / name)
            final = base / self.digests[key]
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
        for other in base.iterdir():
            if other.name != final.name and other.is_dir():
                shutil.rmtree(other, ignore_errors=True)

    def prune(self) -> None:
        """Drop the kept folders of calibrators no longer in the spec (after a run succeeded):
        the folder keeps what the study has, not every calibrator it ever had."""
        if not self.root.is_dir():
            return
        for other in self.root.iterdir():
            if other.is_dir() and other.name not in self.digests:
                shutil.rmtree(other, ignore_errors=True)
