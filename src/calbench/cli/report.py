"""Verbs ``aggregate`` and ``render-report``: the study's tables and the HTML report
(:func:`calbench.report.build.aggregate`, :func:`calbench.report.build.render_report`).

The *study spec* (``--spec``, JSON) is the slice of the configuration the tables need::

    {"title": ..., "description": ..., "protocol": {...},
     "datasets": {name: {"display": ...}},
     "models": {name: {"dataset": ..., "display": {"name": ..., "loss": ...}}},
     "calibrators": {name: {"display": ...}},
     "table_metrics": [...], "losses_metrics": [...],
     "reference": {"tolerances": {metric: tol}, "units": "fraction" | "display",
                   "rename": {"models": {...}, "methods": {...}, "metrics": {...}, "datasets": {...}}}}

The *run info* (``render-report --run-info FILE``, JSON, every key optional) is what only the
workflow knows (:data:`calbench.report.provenance.RUN_INFO_KEYS`)::

    {"command": ["snakemake", "--cores", "8"], "snakemake_version": "9.1.1",
     "config_files": ["config.yaml"], "workflow_dir": "/path/to/calbench"}
"""

from __future__ import annotations

import argparse

from calbench.cli._args import check_display_names, load_named_plugins, parse_json_arg, writes


def _cmd_aggregate(args: argparse.Namespace) -> int:
    load_named_plugins(args, calibrators=False)  # before the library reads the registries
    from calbench.report.build import aggregate  # lazy: cli start-up

    spec = parse_json_arg(args.spec, "--spec")
    check_display_names(spec)
    aggregate(
        args.metrics,
        args.compare or [],
        spec,
        args.out_csv,
        args.out_compare,
        args.tables_dir,
        reference_csv=args.reference,
    )
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    load_named_plugins(args)  # before the library reads the registries
    from calbench.report.build import ReportInputs, render_report  # lazy: cli start-up

    spec = parse_json_arg(args.spec, "--spec")
    check_display_names(spec)
    from calbench.report.provenance import read_run_info  # lazy: cli start-up

    config = parse_json_arg(args.config, "--config") if args.config else None
    run_info = read_run_info(args.run_info) if args.run_info else None
    inputs = ReportInputs(
        metrics=args.metrics,
        spec=spec,
        compare=args.compare,
        config=config,
        grids=args.grids,
        manifests=args.manifests,
        logits=args.logits,
        splits=args.splits,
        reference_table=args.reference_table,
        sections=args.sections,
        plots=args.plots,
        ts_files=args.ts_files,
        run_info=run_info,
        robustness=args.robustness,
        arena=args.arena,
        over_models=args.over_models,
        partitions=args.partitions,
    )
    render_report(inputs, args.out)
    return 0


def _table_files(args: argparse.Namespace) -> list[tuple[str, str]]:
    """Input files inside ``--tables-dir`` of the kinds aggregate writes there (tables as
    .html, .md, .csv, .tex; reference.csv): their names follow the metrics, so any of them may
    be replaced."""
    import os  # lazy: cli start-up

    tables = os.path.realpath(args.tables_dir)
    named = [*args.metrics, *(args.compare or []), args.reference, args.spec.lstrip("@")]
    return [
        ("--tables-dir", path)
        for path in named
        if path
        and os.path.dirname(os.path.realpath(path)) == tables
        and os.path.splitext(path)[1] in (".html", ".md", ".csv", ".tex")
    ]


# --------------------------------------------------------------------------------------------
# argparse
# --------------------------------------------------------------------------------------------
def register(sub) -> None:
    p = sub.add_parser(
        "aggregate",
        help="all metrics CSVs -> one long CSV and the study's tables (html, md, csv, tex)",
    )
    p.add_argument("--metrics", nargs="+", required=True, help="metrics CSVs from evaluate")
    p.add_argument("--compare", nargs="*", help="comparison CSVs from compare")
    p.add_argument("--spec", required=True, help="study spec JSON (or @file); see module doc")
    p.add_argument(
        "--reference", help="published numbers, long CSV dataset,model,method,metric,value"
    )
    p.add_argument("--out-csv", required=True, help="aggregated long CSV to write")
    p.add_argument("--out-compare", help="aggregated comparison CSV to write")
    p.add_argument("--tables-dir", required=True, help="folder for {metric}.{html,md,csv,tex}")
    writes(p, "--out-csv", "--out-compare", files=_table_files)
    p.set_defaults(func=_cmd_aggregate)

    p = sub.add_parser("render-report", help="the self-contained HTML report (Jinja2)")
    p.add_argument("--metrics", required=True, help="aggregated metrics CSV")
    p.add_argument("--compare", help="aggregated comparison CSV")
    p.add_argument("--spec", required=True, help="study spec JSON (or @file)")
    p.add_argument("--config", help="the full configuration as JSON (or @file), for provenance")
    p.add_argument("--grids", nargs="*", default=[], help=".../{dataset}/{model}/grid.png files")
    p.add_argument("--manifests", nargs="*", default=[], help="dataset manifest JSONs")
    p.add_argument("--logits", nargs="*", default=[], help="logits .npz files (hashed)")
    p.add_argument("--splits", nargs="*", default=[], help="split .npz files (hashed)")
    p.add_argument(
        "--reference-table",
        help="ours versus published numbers: the reference.csv calbench aggregate --reference wrote",
    )
    p.add_argument(
        "--sections",
        nargs="*",
        default=[],
        help="section files of other steps (shift-report's section.json)",
    )
    p.add_argument(
        "--plots",
        nargs="*",
        default=[],
        help=".../{dataset}/{model}/{calibrator}.png reliability diagrams (shown per model)",
    )
    p.add_argument(
        "--ts-files",
        nargs="*",
        default=[],
        help=".../{dataset}/{model}/ts.json fitted temperature scaling (temperature table)",
    )
    p.add_argument(
        "--robustness",
        nargs="*",
        default=[],
        help="results/robustness/{dataset}/{model}.csv of every model (robustness section)",
    )
    p.add_argument(
        "--over-models",
        nargs=2,
        default=None,
        metavar=("WIN_RATES_CSV", "IMPROVEMENT_CSV"),
        help="results/tables/win_rates.csv and improvement.csv of aggregate (verdicts over models)",
    )
    p.add_argument(
        "--partitions",
        nargs="*",
        default=[],
        help="results/partitions/{dataset}/{model}.csv of every model of a cross-fitted study "
        "(spread over partitions section)",
    )
    p.add_argument(
        "--arena",
        nargs="*",
        default=[],
        help="results/arena/{dataset}/{model}.csv of compare-implementations (side-by-side section)",
    )
    p.add_argument(
        "--run-info",
        help="JSON file of what the workflow knows of the run: command, snakemake_version, "
        "config_files, workflow_dir (calbench.report.provenance.RUN_INFO_KEYS; all optional)",
    )
    p.add_argument("--out", required=True, help="report .html to write")
    writes(p, "--out")
    p.set_defaults(func=_cmd_render)
