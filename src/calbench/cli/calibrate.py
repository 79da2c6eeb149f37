"""Verbs ``calibrate`` (the workflow's step: every calibrator of one model), and the single
steps ``fit-calibrator``, ``evaluate`` and ``compare`` for work by hand.

Each verb parses its arguments and calls :mod:`calbench.protocol`, where the protocol is
described; every default of the spec's settings is in :data:`calbench.calibrate_spec.DEFAULTS`.
Heavy libraries are imported by the library functions that use them.
"""

from __future__ import annotations

import argparse
import math

from calbench.calibrate_spec import DEFAULTS
from calbench.cli._args import (
    add_allow_other_logits,
    add_logits_split,
    add_plot_options,
    bootstrap_arg,
    check_display_names,
    load_named_plugins,
    parse_json_arg,
    parse_list,
    plot_options,
    text_arg,
    writes,
)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    load_named_plugins(args)  # before the library reads the registries
    from calbench._deadline import TimeLimitExceeded, limit_text, time_limit  # lazy: cli start-up
    from calbench.protocol import CalibrateSpec  # lazy: cli start-up

    models = _batch(args)
    spec = parse_json_arg(args.spec, "--spec")
    check_display_names(spec)
    _fit_settings(args)
    limit = args.time_limit
    # the rule to give more time: a batch of small models runs as calibrate_batch_<batch>
    # (workflow/rules/calibrate.smk), whose name its log file carries
    rule = "calibrate" if len(models) == 1 else "calibrate_batch_<batch, the log file's name>"
    message = (
        f"calbench calibrate: error: ran past its time limit of {limit_text(limit or 0)} "
        "(--time-limit: the workflow passes the rule's runtime resource) and was stopped; raise "
        f"it (snakemake --set-resources {rule}:runtime=MINUTES) or leave out the calibrator "
        "that hangs"
    )
    written: list = []  # every model's files so far: an error removes the whole batch's
    try:
        with time_limit(limit, message):
            for i, model in enumerate(models):
                try:
                    written += CalibrateSpec.from_dict(spec).run(**model) or []
                except (ValueError, FileNotFoundError, KeyError) as exc:
                    if len(models) == 1:
                        raise
                    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
                    raise ValueError(
                        f"model {i + 1} of {len(models)} (--logits {model['logits_path']}): "
                        f"{msg}; nothing of this batch was written"
                    ) from exc
    except TimeLimitExceeded:
        _remove(written)
        raise ValueError(message.split(": error: ", 1)[1]) from None
    except BaseException:
        _remove(written)
        raise
    return 0


#: the calibrate verb's per-model options: ``(flag, destination, run() keyword)``; each takes
#: one value, or one per ``--logits`` (a batch), --split and the naming options also one shared
_PER_MODEL = (
    ("--split", "split", "split_path"),
    ("--calibrators-dir", "calibrators_dir", "calibrators_dir"),
    ("--metrics-dir", "metrics_dir", "metrics_dir"),
    ("--plots-dir", "plots_dir", "plots_dir"),
    ("--compare", "compare", "compare_out"),
    ("--robustness", "robustness", "robustness_out"),
    ("--partitions", "partitions", "partitions_out"),
    ("--reuse-dir", "reuse_dir", "reuse_dir"),
    ("--dataset", "dataset", "dataset"),
    ("--model", "model", "model"),
)
#: options a batch may give once for all its models (inputs and names, not output paths)
_SHARED = frozenset({"--split", "--dataset"})


def _batch(args: argparse.Namespace) -> list[dict]:
    """The models of one calibrate run: one ``CalibrateSpec.run`` keyword set per ``--logits``,
    the i-th value of each per-model option (:data:`_PER_MODEL`) for the i-th model."""
    logits = args.logits
    models = [{"logits_path": path} for path in logits]
    for flag, dest, key in _PER_MODEL:
        values = getattr(args, dest)
        if values is None:  # an optional option left out: None for every model
            values = [None] * len(logits)
        if len(values) != len(logits) and not (len(values) == 1 and flag in _SHARED):
            once = " once or" if flag in _SHARED else ""
            raise ValueError(
                f"{flag} has {len(values)} values for {len(logits)} --logits; give it{once} "
                "one value per --logits, in the same order"
            )
        for i, model in enumerate(models):
            model[key] = values[i if len(values) > 1 else 0]
    return models


def _remove(paths) -> None:
    from pathlib import Path  # lazy: cli start-up

    for path in paths:
        Path(path).unlink(missing_ok=True)


def _cmd_fit(args: argparse.Namespace) -> int:
    load_named_plugins(args, metrics=False)  # before the library reads the registries
    from calbench.steps import fit_calibrator  # lazy: cli start-up

    params = parse_json_arg(args.params, "--params")
    _fit_settings(args)
    fit_calibrator(
        args.logits,
        args.split,
        args.method,
        params,
        args.out,
        allow_probabilities=args.allow_probabilities,
    )
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    load_named_plugins(args)  # before the library reads the registries
    from calbench.steps import evaluate  # lazy: cli start-up

    evaluate(
        args.logits,
        args.split,
        args.calibrator,
        args.out,
        metrics=parse_list(args.metrics),
        halves=parse_list(args.halves),
        n_bootstrap=args.n_bootstrap,
        level=args.level,
        seed=args.seed,
        ci_halves=parse_list(args.ci_halves),
        ci_metrics=parse_list(args.ci_metrics),
        dataset=args.dataset,
        model=args.model,
        name=args.name,
        allow_other_logits=args.allow_other_logits,
        plot=args.plot,
        plot_options=plot_options(args) if args.plot else None,
    )
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    load_named_plugins(args)  # before the library reads the registries
    from calbench.steps import compare  # lazy: cli start-up

    _fit_settings(args)  # the cross-fitted selection refits the calibrators
    compare(
        args.logits,
        args.split,
        args.calibrators,
        args.out,
        metrics=parse_list(args.metrics),
        baselines=parse_list(args.baselines) or [],
        n_bootstrap=args.n_bootstrap,
        level=args.level,
        seed=args.seed,
        select_folds=args.select_folds,
        select_exclude=parse_list(args.select_exclude) or [],
        dataset=args.dataset,
        model=args.model,
        allow_other_logits=args.allow_other_logits,
    )
    return 0


def _fit_settings(args: argparse.Namespace) -> None:
    """``--device`` and ``--threads`` of the verbs that fit calibrators, before a fit imports
    torch (:func:`calbench._device.use_device`, :func:`calbench._device.set_fit_threads`)."""
    from calbench._device import set_fit_threads, use_device  # lazy: cli start-up

    use_device(args.device)
    set_fit_threads(args.threads)


def _fit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads of the matrix products of the vs, vs_b, ms_b and dirichlet fits on "
        "more than 2^21 logit entries; everything else runs on one thread, and the outputs are "
        "the same for any value (default: torch's choice)",
    )
    p.add_argument(
        "--device",
        choices=("cpu", "cuda", "auto"),
        default="cpu",
        help="device of the torch-based calibrators whose params name none (device 'auto'): "
        "cpu (default: reproducible bit for bit), cuda (a GPU; results agree with the CPU's "
        "within float32 tolerance, not bit for bit) or auto (cuda when a GPU is available)",
    )


def _calibrate_files(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The files ``calibrate`` writes in its folders: each calibrator key's JSON, CSV and PNG
    (none with ``plots.per_calibrator: false``), and the grid, for each model of the batch."""
    from pathlib import Path  # lazy: cli start-up

    spec = parse_json_arg(args.spec, "--spec")
    keys = spec.get("calibrators") if isinstance(spec.get("calibrators"), dict) else {}
    plots = spec.get("plots") if isinstance(spec.get("plots"), dict) else {}
    drawn = plots.get("per_calibrator", True) is not False  # else the grid alone
    out = []
    for plots_dir in args.plots_dir:
        out.append(("--plots-dir", Path(plots_dir) / "grid.png"))
    for cal_dir, met_dir, plots_dir in zip(
        args.calibrators_dir, args.metrics_dir, args.plots_dir, strict=False
    ):
        for key in keys:
            out += [
                ("--calibrators-dir", Path(cal_dir) / f"{key}.json"),
                ("--metrics-dir", Path(met_dir) / f"{key}.csv"),
            ] + ([("--plots-dir", Path(plots_dir) / f"{key}.png")] if drawn else [])
    return out


def _minutes(text: str) -> float:
    """``--time-limit``: a positive, finite number of minutes."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of minutes")
    return value


def _naming(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset", type=text_arg, help="dataset name for the CSV (default: from the logits file)"
    )
    p.add_argument(
        "--model", type=text_arg, help="model name for the CSV (default: from the logits file)"
    )


def _bootstrap(p: argparse.ArgumentParser, section: str) -> None:
    """``--n-bootstrap`` (the ``section``'s), ``--level`` and ``--seed`` (the evaluation's)."""
    n, ev = DEFAULTS[section]["n_bootstrap"], DEFAULTS["evaluation"]
    p.add_argument(
        "--n-bootstrap", type=bootstrap_arg, default=n, help=f"bootstrap resamples (default {n})"
    )
    p.add_argument(
        "--level", type=float, default=ev["level"], help=f"confidence level (default {ev['level']})"
    )
    p.add_argument(
        "--seed", type=int, default=ev["seed"], help=f"bootstrap seed (default {ev['seed']})"
    )


def _listed(section: str, key: str) -> str | None:
    """A list default of the spec as the text of its option (``None`` stays ``None``)."""
    value = DEFAULTS[section][key]
    return None if value is None else ",".join(value)


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate",
        help="every calibrator of one model (or of each of several): fit, metrics, diagrams, "
        "comparisons, grid",
        description="Fit every calibrator of the spec on the validation half, evaluate each on "
        "both halves with its reliability diagram, compare them (paired tests) and draw the grid: "
        "DIR/<key>.json, DIR/<key>.csv, DIR/<key>.png, the comparison CSV and DIR/grid.png. The "
        "files equal those of fit-calibrator, evaluate, compare and plot-reliability --grid. Several "
        "--logits (each per-model option then one value per model) calibrate a batch of models in "
        "one process, each model's files the bytes of a run of its own; an error in one names it "
        "and removes every file of the batch.",
    )
    several = " (several models in one process: one value per --logits, in its order)"
    p.add_argument(
        "--logits", nargs="+", required=True, help="logits .npz written by cache-logits" + several
    )
    p.add_argument(
        "--split",
        nargs="+",
        required=True,
        help="split .npz written by split (one for all, or one per --logits)",
    )
    p.add_argument(
        "--dataset", nargs="+", type=text_arg,
        help="dataset name for the CSV (default: from the logits file; one for all, or one per "
        "--logits)",
    )  # fmt: skip
    p.add_argument(
        "--model", nargs="+", type=text_arg,
        help="model name for the CSV (default: from the logits file)" + several,
    )  # fmt: skip
    p.add_argument(
        "--spec",
        required=True,
        help="@file.json with calibrators, evaluation, compare and plots sections "
        "(calbench.calibrate_spec.CALIBRATE_SPEC; the workflow writes it under results/specs/)",
    )
    _fit_options(p)
    for flag, what in (
        ("--calibrators-dir", "folder of the calibrator JSONs"),
        ("--metrics-dir", "folder of the metric CSVs"),
        ("--plots-dir", "folder of the diagrams and grid.png"),
        ("--compare", "comparison .csv to write"),
    ):
        p.add_argument(flag, nargs="+", required=True, help=what + several)
    p.add_argument(
        "--robustness",
        nargs="+",
        help="also write the calibrators' ranks under other ECE variants to this .csv" + several,
    )
    p.add_argument(
        "--partitions",
        nargs="+",
        help="evaluation.scheme crossfit: also write each comparison's spread over the "
        "repeated partitions to this .csv" + several,
    )
    p.add_argument(
        "--reuse-dir",
        nargs="+",
        help="folder keeping each calibrator's files under a digest of all it depends on: an "
        "unchanged calibrator is copied from there instead of refitted" + several,
    )
    p.add_argument(
        "--time-limit",
        type=_minutes,
        help="wall-clock minutes the job may run (the workflow passes the rule's runtime "
        "resource): past it the job stops with one line and writes nothing (default: no limit)",
    )
    writes(p, "--compare", "--robustness", "--partitions", files=_calibrate_files)
    p.set_defaults(func=_cmd_calibrate)

    p = sub.add_parser(
        "fit-calibrator",
        help="fit a calibrator on the validation half of a model's logits",
        description="Fit calibrator METHOD on the validation half and write its JSON.",
    )
    add_logits_split(p)
    p.add_argument("--method", required=True, help="registry name (calbench.calibrators.REGISTRY)")
    p.add_argument("--params", default="{}", help="hyperparameters as a JSON object (or @file)")
    _fit_options(p)
    p.add_argument(
        "--allow-probabilities",
        action="store_true",
        help="fit even if every row is a probability vector (default: refuse; pass logits)",
    )
    p.add_argument("--out", required=True, help="calibrator .json to write")
    writes(p, "--out")
    p.set_defaults(func=_cmd_fit)

    p = sub.add_parser(
        "evaluate",
        help="every metric of one calibrator on both halves, long CSV with bootstrap CIs "
        "(and its reliability diagram with --plot)",
        description="Apply a fitted calibrator to both halves and write long-format metrics; "
        "with --plot, also draw its reliability diagram on the test half (the figure "
        "plot-reliability draws).",
    )
    add_logits_split(p)
    _naming(p)
    p.add_argument("--calibrator", required=True, help="calibrator .json from fit-calibrator")
    p.add_argument(
        "--name", type=text_arg, help="method label in the CSV (default: the calibrator file stem)"
    )
    p.add_argument(
        "--metrics",
        default=_listed("evaluation", "metrics"),
        help=f"comma-separated metric names (default: {_listed('evaluation', 'metrics')})",
    )
    p.add_argument(
        "--halves",
        default=_listed("evaluation", "halves"),
        help=f"comma-separated halves (default: {_listed('evaluation', 'halves')})",
    )
    _bootstrap(p, "evaluation")
    p.add_argument(
        "--ci-halves", help="halves that get bootstrap intervals (default: all of --halves)"
    )
    p.add_argument(
        "--ci-metrics", help="metrics that get bootstrap intervals (default: all of --metrics)"
    )
    add_allow_other_logits(p)
    p.add_argument("--plot", help="also draw the reliability diagram (test half) to this image")
    add_plot_options(p)
    p.add_argument("--out", required=True, help="metrics .csv to write")
    writes(p, "--out", "--plot")
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser(
        "compare",
        help="paired tests: calibrators of a model vs baselines and the cross-fitted best",
        description="Paired tests on the test half of each calibrator against each baseline "
        "and of the best calibrator (per metric, chosen by K-fold cross-fitting inside the "
        "validation half: each calibrator refitted on K - 1 folds from its JSON's method and "
        "hyperparameters, scored on the held-out fold) against every other one; method names "
        "are the calibrator file stems. Only verdict-eligible metrics (Metric.verdicts).",
    )
    add_logits_split(p)
    _naming(p)
    p.add_argument("--calibrators", nargs="+", required=True, help="calibrator .json files")
    p.add_argument(
        "--baselines",
        default=_listed("compare", "baselines"),
        help=f"comma-separated baselines (default: {_listed('compare', 'baselines')})",
    )
    p.add_argument(
        "--metrics",
        default=_listed("compare", "metrics"),
        help="comma-separated verdict-eligible metric names (default: "
        f"{_listed('compare', 'metrics')})",
    )
    folds = DEFAULTS["compare"]["select_folds"]
    p.add_argument(
        "--select-folds",
        type=int,
        default=folds,
        help=f"folds of the cross-fitted selection (default {folds})",
    )
    p.add_argument(
        "--select-exclude",
        default=_listed("compare", "select_exclude"),
        help="comma-separated calibrators left out of the selection's candidates (cost)",
    )
    _bootstrap(p, "compare")
    _fit_options(p)
    add_allow_other_logits(p)
    p.add_argument("--out", required=True, help="comparison .csv to write")
    writes(p, "--out")
    p.set_defaults(func=_cmd_compare)
