"""The post-hoc calibration protocol on files: fit a calibrator, evaluate it, compare calibrators.

The protocol is the study's (Vasilev 2021, §4-5): calibrators are fitted on the validation half of
a model's test-set logits (:func:`calbench.split.load_halves`) and applied to both halves; every
metric of :data:`calbench.metrics.METRICS` is reported on the test half (and, to show a
calibrator's over-fit, on the validation half), with the bootstrap confidence interval its
registry entry names (``Metric.interval``, :func:`calbench.stats.bootstrap_ci`).
:func:`calbench.stats.comparisons.compare_rows` tests, on the *test* half, every calibrator against
each baseline and the "best" calibrator against every other one, each family with Holm's
correction; "best" is chosen by K-fold cross-fitting inside the *validation* half
(:func:`calbench.stats.selection.crossfit_scores`: each candidate refitted on K - 1 folds and scored
on the held-out one), so neither the samples a calibrator was fitted on nor the test half pick
the winner.

One function per workflow step (rule = ``calbench`` verb = function): :func:`fit_calibrator`
(``fit-calibrator``), :func:`evaluate` (``evaluate``: metrics CSV and, optionally, the
reliability diagram), :func:`compare` (``compare``) and :func:`plot_reliability`
(``plot-reliability``). Heavy libraries (torch, matplotlib) are imported inside the functions
that use them.
"""

from __future__ import annotations

from pathlib import Path

from calbench import isolation
from calbench.calibrators import get_calibrator, save_calibrator
from calbench.io import array_digest
from calbench.results import COMPARE_COLUMNS, METRIC_COLUMNS, ROBUSTNESS_COLUMNS, write_long_csv
from calbench.reuse import Reuse, reuse_digest  # noqa: F401  (reuse_digest: named in docs)
from calbench.split import HALVES, load_halves
from calbench.stats.comparisons import (  # noqa: F401  (re-exported)
    check_verdict_metrics,
    compare_rows,
    comparison_pairs,
    verdict_metrics,
)
from calbench.stats.selection import check_folds
from calbench.steps import (  # noqa: F401  (re-exported: the single steps and their checks)
    MAX_RESAMPLES,
    PLOT_OPTIONS,
    _check_plot_options,
    _draw,
    _log,
    _maker,
    apply_names,
    check_bootstrap,
    check_subset,
    compare,
    evaluate,
    evaluate_rows,
    fit_calibrator,
    load_checked_calibrator,
    method_name,
    plot_reliability,
    select_best,
    select_metrics,
)

# --------------------------------------------------------------------------------------------
# one model, every calibrator: the workflow's calibration step
# --------------------------------------------------------------------------------------------
#: keys of the ``calibrate`` spec (a JSON file the workflow writes from the config) and of its
#: sections; every key is required, so a spec written by another version fails here, by name
CALIBRATE_SPEC = {
    "calibrators": None,  # {key: {"method": str, "params": {...}, "display": str}}
    "evaluation": ("metrics", "halves", "n_bootstrap", "level", "seed", "ci_halves", "ci_metrics"),
    "compare": ("metrics", "baselines", "n_bootstrap", "select_folds", "select_exclude"),
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
            "invalid calibrate spec: " + "; ".join(problems) + " (write it with "
            "calbench.calibrate_spec.calibrate_spec(config), as the workflow does, or by hand "
            "with these keys)"
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
    Then the paired comparisons (:func:`compare_rows`, ``spec["compare"]``; the "best"
    calibrator of each compared metric chosen by :func:`select_best`: ``select_folds``-fold
    cross-fitting inside the validation half, over every calibrator but ``select_exclude``,
    which costs ``select_folds`` more fits of each candidate) -> ``compare_out``
    and the grid of every calibrator's diagram -> ``plots_dir/grid.png``; with ``robustness_out``
    the calibrators' ranks under other ECE variants and their
    bootstrap first-place probabilities (:func:`calbench.stats.robustness.robustness_rows`,
    ``evaluation.n_bootstrap`` resamples, ``evaluation.seed``) -> that CSV. Each file equals what
    the single-step verbs (``fit-calibrator``, ``evaluate``, ``compare``, ``plot-reliability
    --grid``) write from the same inputs; the predictions come from the calibrator as saved, so
    the JSON is what every downstream step reads.

    One process per model instead of one per (model, calibrator) and step: the interpreter and
    library imports (~1.5 s) are paid once per model. An error names the calibrator; on any
    error every file written so far is removed (no partial output). Returns the written paths.

    Plug-in code is isolated (:mod:`calbench.isolation`): the logits and labels are read-only,
    each calibrator fits and predicts on copies of them, its predictions are checked (a NumPy
    float ``(N, K)`` array of probabilities, no reused buffer) and made read-only, plug-in
    metrics get read-only views and must return finite floats; a plug-in's failure is one line
    naming the calibrator or metric.

    ``reuse_dir``: a folder of copies of each calibrator's three files under a digest of
    everything they depend on (:func:`reuse_digest`: the calibrator's entry, the evaluation and
    plot settings, the logits, the split, the dataset and model names, the library's source and
    the versions of the numeric libraries). A calibrator whose digest has a copy is not refitted:
    its files are copied back (the bytes a refit would write, since every step is
    deterministic) and its predictions are recomputed from its JSON for the comparisons, the
    grid and the ranks; what the cross-fitted selection found for it is kept there too
    (:meth:`calbench.reuse.Reuse.known_selection`), so it is not refitted on the folds either.
    Adding a calibrator to the study then fits only the new one. A calibrator's files are kept
    only after the logits and labels are verified unchanged (their digest as loaded), so no kept
    result was computed on inputs that plug-in code altered.
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
    check_verdict_metrics(list(compared))
    ci_halves = check_subset(ev["ci_halves"], half_names, "evaluation.ci_halves", "halves")
    ci_metrics = check_subset(ev["ci_metrics"], list(chosen), "evaluation.ci_metrics", "metrics")
    _check_plot_options(plot)
    calibrators = spec["calibrators"]
    for base in cmp["baselines"]:
        if base not in calibrators:
            raise ValueError(f"compare.baselines names {base!r}, which is not a calibrator key")
    check_folds(cmp["select_folds"])
    exclude = check_subset(
        list(cmp["select_exclude"] or []),
        list(calibrators),
        "compare.select_exclude",
        "calibrators",
    )
    # every calibrator constructed before any work: an unknown method or parameter fails first
    fitters = {}
    for key, entry in calibrators.items():
        try:
            fitters[key] = get_calibrator(entry["method"], **(entry.get("params") or {}))
        except ValueError as exc:
            raise ValueError(f"calibrator {key!r} (method {entry['method']!r}): {exc}") from None

    data = load_halves(logits_path, split_path)
    check_folds(cmp["select_folds"], len(data["val"][1]))  # before any fit, not at the selection
    apply_names(data, dataset, model)
    meta = data["meta"]
    # every calibrator and metric sees these arrays: none may change them (calbench.isolation)
    isolation.freeze(*data["val"], *data["test"])
    inputs = array_digest(*data["val"], *data["test"])

    def check_unchanged(during: str) -> None:
        if array_digest(*data["val"], *data["test"]) != inputs:
            raise ValueError(
                f"the logits or labels changed {during} (plug-in code wrote into read-only "
                "arrays); fix the plug-in, whose changes void every later result"
            )

    dirs = {"cal": Path(calibrators_dir), "met": Path(metrics_dir), "plot": Path(plots_dir)}
    written: list[Path] = []
    try:
        test_probs, val_probs = {}, {}
        test_jackknives: dict = {}  # the metrics rows' jackknives, for the comparisons
        reuse = None if reuse_dir is None else Reuse(reuse_dir, spec, data, split_path)
        for key, cal in fitters.items():
            path, csv, png = paths = (
                dirs["cal"] / f"{key}.json",
                dirs["met"] / f"{key}.csv",
                dirs["plot"] / f"{key}.png",
            )
            if reuse is not None and reuse.restore(key, paths):
                try:
                    saved = load_checked_calibrator(path, data)
                    for h, kept_probs in (("test", test_probs), ("val", val_probs)):
                        kept_probs[key] = isolation.predict(
                            saved, data[h][0], earlier=[*test_probs.values(), *val_probs.values()]
                        )
                except (ValueError, OSError):  # a kept file that does not load: refit
                    test_probs.pop(key, None)
                    val_probs.pop(key, None)
                    reuse.forget(key, paths)
                else:
                    written += paths
                    continue
            try:
                isolation.fit(cal, *data["val"])
                cal.set_fitted_on(meta["order_hash"], meta["logits_sha256"])
                save_calibrator(cal, path)
                written.append(path)
                saved = load_checked_calibrator(path, data)
                probs = {}
                for h in dict.fromkeys([*half_names, "val"]):
                    earlier = [*probs.values(), *test_probs.values(), *val_probs.values()]
                    probs[h] = isolation.predict(saved, data[h][0], earlier=earlier)
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
                    jackknives=(kept := {}),
                )
                test_jackknives[key] = kept.get("test", {})
                title = str(calibrators[key].get("display") or key)
                _draw({key: probs["test"]}, data["test"][1], png, grid=False, title=title, **plot)
                written.append(png)
                write_long_csv(csv, rows, METRIC_COLUMNS)
                written.append(csv)
            except ValueError as exc:
                raise ValueError(
                    f"calibrator {key!r} (method {calibrators[key]['method']!r}): {exc}"
                ) from exc.__cause__
            if reuse is not None:
                # only results computed on intact inputs are kept
                check_unchanged(f"while calibrator {key!r} ran")
                reuse.store(key, paths)
            test_probs[key], val_probs[key] = probs["test"], probs["val"]
        makers = {key: _maker(e["method"], e.get("params") or {}) for key, e in calibrators.items()}
        selection = {"folds": cmp["select_folds"], "seed": ev["seed"], "metrics": list(compared)}
        found: dict = {}
        best, selected_on = select_best(
            makers, data["val"], compared, folds=cmp["select_folds"], seed=ev["seed"],
            exclude=exclude, log=_log, found=found,
            known=None if reuse is None else reuse.known_selection(selection),
        )  # fmt: skip
        if reuse is not None:
            check_unchanged("during the cross-fitted selection")  # kept only if intact
            reuse.keep_selection(selection, found)
        rows = compare_rows(
            data,
            test_probs,
            compared,
            list(cmp["baselines"]),
            best=best,
            selected_on=selected_on,
            n_bootstrap=cmp["n_bootstrap"],
            level=ev["level"],
            seed=ev["seed"],
            jackknives=test_jackknives,
        )
        check_unchanged("during the selection or the comparisons")  # before any shared output
        write_long_csv(compare_out, rows, COMPARE_COLUMNS)
        written.append(Path(compare_out))
        grid = dirs["plot"] / "grid.png"
        _draw(test_probs, data["test"][1], grid, grid=True, **plot)
        written.append(grid)
        if robustness_out is not None:
            from calbench.stats.robustness import robustness_rows  # lazy: code inputs

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
