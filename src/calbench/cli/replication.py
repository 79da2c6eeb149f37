"""Verbs of the replication stage (workflow/rules/replication.smk): ``reference-csv`` and
``replication-tables`` (a study's published numbers beside ours, :mod:`calbench.reference`),
``temperature-sweep`` and ``guo-kull-tables`` (the Guo et al. 2017 / Kull et al. 2019 study on
Kängsepp's logits, :mod:`calbench.reference.guo_kull`, config/guo_kull_logits.yaml)."""

from __future__ import annotations

import argparse
from pathlib import Path

from calbench.cli._args import load_named_plugins, n_bins_arg, parse_json_arg, writes


def _floats(text: str, flag: str) -> list[float]:
    try:
        return [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"{flag} takes comma-separated numbers, got {text!r}") from None


def _curve(text: str | None) -> list[float] | None:
    """``START,STOP,NUM`` -> ``numpy.linspace(START, STOP, NUM)`` as a list."""
    if not text:
        return None
    parts = text.split(",")
    try:
        start, stop, num = float(parts[0]), float(parts[1]), int(parts[2])
        if len(parts) != 3:
            raise ValueError
    except (ValueError, IndexError):
        raise ValueError(f"--curve takes START,STOP,NUM (e.g. 0.25,4,76), got {text!r}") from None
    if not (0 < start < stop) or num < 2:
        raise ValueError(f"--curve needs 0 < START < STOP and NUM >= 2, got {text!r}")
    import numpy as np

    return [float(t) for t in np.linspace(start, stop, num)]


def register(sub) -> None:
    p = sub.add_parser(
        "reference-csv",
        help="write a packaged table of published numbers as the workflow's reference CSV",
    )
    p.add_argument(
        "--name",
        default="coursework_2021",
        help="packaged table (coursework_2021, calarena_cv_multiclass)",
    )
    p.add_argument("--out", required=True, help="CSV to write: dataset,model,method,metric,value")
    writes(p, "--out")
    p.set_defaults(func=cmd_reference_csv)

    p = sub.add_parser(
        "replication-tables",
        help="ours vs published in the study's table layout, plus each model's accuracy check",
    )
    p.add_argument("--metrics", required=True, help="aggregated metrics CSV (calbench aggregate)")
    p.add_argument("--reference", required=True, help="published numbers (reference-csv output)")
    p.add_argument("--spec", required=True, help="JSON: models, datasets, calibrators, reference")
    p.add_argument("--logits", nargs="*", default=[], help="logits .npz of every model")
    p.add_argument(
        "--accuracy-tolerance", type=float, default=0.1, help="percentage points (default 0.1)"
    )
    p.add_argument("--out-html", required=True, help="self-contained HTML page of every table")
    p.add_argument("--out-md", required=True, help="the same tables in Markdown")
    p.add_argument("--out-csv", required=True, help="every cell, long format")
    p.add_argument("--out-accuracy", required=True, help="accuracy check CSV")
    writes(p, "--out-html", "--out-md", "--out-csv", "--out-accuracy")
    p.set_defaults(func=cmd_replication_tables)

    p = sub.add_parser(
        "temperature-sweep",
        help="reliability diagrams of softmax(z / T) for fixed T and the ECE-vs-temperature curve",
    )
    p.add_argument("--logits", required=True, help="logits .npz (cache-logits / import-logits)")
    p.add_argument("--split", required=True, help="split .npz of these logits")
    p.add_argument("--calibrator", default=None, help="fitted ts JSON: mark its temperature")
    p.add_argument("--model", default=None, help="label (default: the logits file's stem)")
    p.add_argument("--temperatures", default="0.5,1,1.5,2", help="diagram temperatures")
    p.add_argument("--curve", default="0.25,4,76", help="curve grid START,STOP,NUM")
    p.add_argument("--n-bins", type=n_bins_arg, default=15, help="equal-width bins (default 15)")
    p.add_argument("--out-grid", required=True, help="PNG: one diagram per temperature")
    p.add_argument("--out-curve", required=True, help="PNG: ECE vs temperature")
    p.add_argument("--out-csv", required=True, help="CSV: model,kind,temperature,ece")
    writes(p, "--out-grid", "--out-curve", "--out-csv")
    p.set_defaults(func=cmd_temperature_sweep)

    p = sub.add_parser(
        "guo-kull-tables",
        help="ours vs Guo et al. 2017, Kull et al. 2019, Kängsepp, CalArena on the same logits",
    )
    p.add_argument("--metrics", required=True, help="aggregated metrics CSV (calbench aggregate)")
    p.add_argument("--spec", required=True, help="JSON: models, calibrators, tolerances, ...")
    p.add_argument("--summary-logits", default=None, help="logits .npz of the summary model")
    p.add_argument("--summary-split", default=None, help="its split .npz")
    p.add_argument(
        "--summary-calibrators",
        nargs="*",
        default=[],
        help="fitted calibrator JSONs of the summary table (method = file stem)",
    )
    p.add_argument("--sweep-csvs", nargs="*", default=[], help="temperature-sweep CSVs")
    p.add_argument(
        "--sweep-figures",
        nargs="*",
        default=[],
        help="temperature-sweep PNGs (results/guo_kull/sweep/<dataset>/<model>/<name>.png)",
    )
    p.add_argument("--out-html", required=True, help="self-contained HTML page")
    p.add_argument("--out-md", required=True, help="the tables in Markdown")
    p.add_argument("--out-csv", required=True, help="every published cell beside ours")
    p.add_argument("--out-summary", required=True, help="summary table CSV")
    writes(p, "--out-html", "--out-md", "--out-csv", "--out-summary")
    p.set_defaults(func=cmd_guo_kull_tables)


def cmd_reference_csv(args) -> int:
    from calbench.io import atomic_write_text  # lazy: cli start-up
    from calbench.reference import reference_csv_text  # lazy: cli start-up

    text = reference_csv_text(args.name)
    atomic_write_text(args.out, text)
    print(f"{args.out}: {text.count(chr(10)) - 1} published cells of {args.name}")
    return 0


def cmd_replication_tables(args) -> int:
    load_named_plugins(args, calibrators=False)  # before the library reads the registries
    from calbench.reference.replication import write_replication_tables  # lazy: cli start-up

    s = write_replication_tables(
        args.metrics,
        args.reference,
        parse_json_arg(args.spec, "--spec"),
        args.logits,
        out_csv=args.out_csv,
        out_accuracy=args.out_accuracy,
        out_md=args.out_md,
        out_html=args.out_html,
        accuracy_tolerance=args.accuracy_tolerance,
    )
    print(
        f"{s['tables']} tables, {s['cells']} cells, {s['flagged']} beyond tolerance; "
        f"accuracy check: {s['accuracy_flagged']} of {s['models']} models off by more than "
        f"{args.accuracy_tolerance} pp"
    )
    return 0


def cmd_temperature_sweep(args: argparse.Namespace) -> int:
    load_named_plugins(args, metrics=False)  # before the library reads the registries
    from calbench.reference.guo_kull import write_sweep  # lazy: cli start-up

    rows = write_sweep(
        args.logits,
        args.split,
        model=args.model or Path(args.logits).stem,
        out_grid=args.out_grid,
        out_curve=args.out_curve,
        out_csv=args.out_csv,
        temperatures=_floats(args.temperatures, "--temperatures"),
        curve=_curve(args.curve),
        ts_calibrator=args.calibrator,
        n_bins=args.n_bins,
    )
    shown = ", ".join(
        f"T={r['temperature']:g}: {100 * r['ece']:.2f}%" for r in rows if r["kind"] == "diagram"
    )
    print(f"{args.out_grid}: ECE {shown}")
    return 0


def cmd_guo_kull_tables(args: argparse.Namespace) -> int:
    load_named_plugins(args)  # before the library reads the registries
    from calbench.reference.guo_kull import FLAGGED, write_tables  # lazy: cli start-up

    spec = parse_json_arg(args.spec, "--spec")
    figures: dict[str, list[str]] = {}
    for p in args.sweep_figures:
        figures.setdefault(Path(p).parent.name, []).append(p)
    cells = write_tables(
        args.metrics,
        spec,
        out_html=args.out_html,
        out_md=args.out_md,
        out_csv=args.out_csv,
        out_summary=args.out_summary,
        summary_logits=args.summary_logits,
        summary_split=args.summary_split,
        summary_calibrators={Path(p).stem: p for p in args.summary_calibrators},
        sweep_csvs=args.sweep_csvs,
        sweep_figures=figures,
    )
    flagged = sum(c["status"] == FLAGGED for c in cells)
    compared = sum(c["ours"] is not None for c in cells)
    print(
        f"{len(cells)} published cells, {compared} with a value of ours, {flagged} beyond tolerance"
    )
    return 0
