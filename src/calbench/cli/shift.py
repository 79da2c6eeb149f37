"""Verbs of the dataset-shift stage (docs/workflow.md, "Dataset shift"):

``download-corrupted`` (the published CIFAR-10-C / CIFAR-100-C archive, checksum-pinned),
``corrupt-dataset`` (one corruption at severities 1-5 of a dataset's test set: generated, or
extracted from the published archive), ``shift-logits`` (a model's logits on the test half of
every corrupted set), ``evaluate-shift`` (clean-fitted calibrators on every corruption and
severity, paired bootstrap) and ``shift-report`` (the report section and summary tables).
Each parses arguments and calls one function of :mod:`calbench.shift` / :mod:`calbench.report.shift`.
"""

from __future__ import annotations

import argparse
import os
import sys

from calbench.cli._args import (
    add_threads_arg,
    batch_size_arg,
    bootstrap_arg,
    load_named_plugins,
    parse_json_arg,
    parse_list,
    set_threads,
    writes,
)


def _options(text: str | None, what: str) -> dict | None:
    return parse_json_arg(text, what) if text else None


def _dataset_options(text: str | None) -> dict | None:
    from calbench.data.prepare import dataset_options  # lazy: cli start-up

    return dataset_options(_options(text, "--dataset-spec")) if text else None


def _cmd_download(args: argparse.Namespace) -> int:
    from calbench.shift.datasets import download_corrupted  # lazy: cli start-up

    path = download_corrupted(
        args.dataset, args.out, mirrors=args.mirror, options=_options(args.archive, "--archive")
    )
    print(f"{path}: verified")
    return 0


def _cmd_corrupt(args: argparse.Namespace) -> int:
    from calbench.shift.datasets import extract_published, generate_corrupted  # lazy: cli start-up

    if args.source == "generate":
        if args.archive_file:
            raise ValueError("--archive-file is for --source published; drop it")
        manifest = generate_corrupted(
            args.dataset,
            args.corruption,
            data_root=args.data_root,
            out=args.out,
            seed=args.seed,
            limit=args.limit,
            dataset_options=_dataset_options(args.dataset_spec),
        )
    else:
        if not args.archive_file:
            raise ValueError("--source published needs --archive-file (from download-corrupted)")
        manifest = extract_published(
            args.dataset,
            args.corruption,
            archive=args.archive_file,
            data_root=args.data_root,
            out=args.out,
            limit=args.limit,
            options=_options(args.archive, "--archive"),
            dataset_options=_dataset_options(args.dataset_spec),
        )
    print(
        f"{args.out}: {manifest['corruption']} 5 x {manifest['n']} images, sha256 {manifest['sha256'][:16]}"
    )
    return 0


def _cmd_logits(args: argparse.Namespace) -> int:
    from calbench.models import parse_spec  # lazy: cli start-up
    from calbench.shift.logits import shift_logits  # lazy: cli start-up

    set_threads(args.threads)
    summary = shift_logits(
        parse_spec(args.spec),
        corrupted=args.corrupted,
        clean_logits=args.logits,
        split=args.split,
        out=args.out,
        checkpoint=args.checkpoint,
        batch_size=args.batch_size,
        device=args.device,
        dataset_options=_dataset_options(args.dataset_spec),
    )
    acc = summary["accuracy"].mean(axis=0)
    print(
        f"{args.out}: {len(summary['corruptions'])} corruptions x 5 severities x "
        f"{summary['n_test']} images; mean accuracy by severity "
        + " ".join(f"{a:.3f}" for a in acc)
    )
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    load_named_plugins(args)  # before the library reads the registries
    from calbench.results import (  # lazy: cli start-up
        SHIFT_COMPARE_COLUMNS,
        SHIFT_METRIC_COLUMNS,
        write_long_csv,
    )
    from calbench.shift.evaluate import evaluate_shift  # lazy: cli start-up

    rows, compare = evaluate_shift(
        args.shift_logits,
        args.logits,
        args.split,
        args.calibrators,
        metrics=parse_list(args.metrics) or [],
        compare_metrics=parse_list(args.compare_metrics) or [],
        n_bootstrap=args.n_bootstrap,
        level=args.level,
        seed=args.seed,
        select_folds=args.select_folds,
        select_exclude=parse_list(args.select_exclude) or [],
        log=lambda message: print(message, file=sys.stderr),
    )
    write_long_csv(args.out_metrics, rows, SHIFT_METRIC_COLUMNS)
    write_long_csv(args.out_compare, compare, SHIFT_COMPARE_COLUMNS)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    load_named_plugins(args, calibrators=False)  # before the library reads the registries
    from calbench.report.shift import shift_report  # lazy: cli start-up

    shift_report(
        metrics=args.metrics,
        compare=args.compare,
        manifests=args.manifests,
        spec=parse_json_arg(args.spec, "--spec"),
        out_section=args.out_section,
        out_dir=args.out_dir,
    )
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "download-corrupted", help="the published CIFAR-10-C/100-C archive, verified"
    )
    p.add_argument("--dataset", required=True, help="cifar10 or cifar100")
    p.add_argument("--out", required=True, help="archive path to write")
    p.add_argument("--mirror", action="append", default=[], help="folder holding the archive")
    p.add_argument("--archive", help="overrides of the pinned archive facts as JSON (urls, md5)")
    writes(p, "--out")
    p.set_defaults(func=_cmd_download)

    p = sub.add_parser("corrupt-dataset", help="one corruption at severities 1-5 of a test set")
    p.add_argument("--dataset", required=True, help="calbench.data dataset name")
    p.add_argument("--corruption", required=True, help="corruption name (calbench.shift)")
    p.add_argument("--source", choices=("generate", "published"), default="generate")
    p.add_argument("--data-root", required=True, help="the clean dataset's root")
    p.add_argument("--archive-file", help="published archive (--source published)")
    p.add_argument("--archive", help="overrides of the pinned archive facts as JSON")
    p.add_argument("--dataset-spec", help="the dataset's config entry as JSON")
    p.add_argument("--limit", type=int, default=None, help="first N test images only")
    p.add_argument("--seed", type=int, default=0, help="corruption seed (default 0)")
    p.add_argument("--out", required=True, help="<corruption>.npy to write (manifest beside it)")
    writes(p, "--out", files=lambda a: [("--out (manifest)", os.path.splitext(a.out)[0] + ".json")])
    p.set_defaults(func=_cmd_corrupt)

    p = sub.add_parser("shift-logits", help="a model's logits on the test half of corrupted sets")
    p.add_argument("--spec", required=True, help="model config entry as JSON, or a file")
    p.add_argument("--checkpoint", default=None, help="the model's weights")
    p.add_argument("--logits", required=True, help="the model's clean logits .npz")
    p.add_argument("--split", required=True, help="the study's split .npz")
    p.add_argument("--corrupted", nargs="+", required=True, help="<corruption>.npy files")
    p.add_argument("--dataset-spec", help="the dataset's config entry as JSON")
    p.add_argument("--batch-size", type=batch_size_arg, default=500, help="inference batch size")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--out", required=True, help="shift logits .npz to write")
    add_threads_arg(p)
    writes(p, "--out")
    p.set_defaults(func=_cmd_logits)

    p = sub.add_parser(
        "evaluate-shift", help="clean-fitted calibrators under shift; paired comparisons"
    )
    p.add_argument("--shift-logits", required=True, help="shift logits .npz (shift-logits)")
    p.add_argument("--logits", required=True, help="the model's clean logits .npz")
    p.add_argument("--split", required=True, help="the study's split .npz")
    p.add_argument("--calibrators", nargs="+", required=True, help="<method>.json files")
    p.add_argument("--metrics", default="accuracy,ece,ece_ub,nll", help="comma-separated metrics")
    p.add_argument(
        "--compare-metrics",
        default="ece_ub,nll",
        help="verdict-eligible metrics compared (ece_ub or means; empty: none)",
    )
    p.add_argument(
        "--select-folds", type=int, default=5, help="folds of the cross-fitted best (default 5)"
    )
    p.add_argument(
        "--select-exclude", help="comma-separated calibrators that are not candidates for best"
    )
    p.add_argument("--n-bootstrap", type=bootstrap_arg, default=200, help="bootstrap resamples")
    p.add_argument("--level", type=float, default=0.95, help="confidence level")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--out-metrics", required=True, help="long metrics CSV to write")
    p.add_argument("--out-compare", required=True, help="comparison CSV to write")
    writes(p, "--out-metrics", "--out-compare")
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser("shift-report", help="the dataset-shift report section and tables")
    p.add_argument("--metrics", nargs="+", required=True, help="metrics CSVs of evaluate-shift")
    p.add_argument("--compare", nargs="*", default=[], help="comparison CSVs of evaluate-shift")
    p.add_argument("--manifests", nargs="*", default=[], help="corrupted-set manifests (.json)")
    p.add_argument("--spec", required=True, help="study spec JSON (labels; or @file)")
    p.add_argument(
        "--out-section", required=True, help="the report section to write (JSON: id, title, data)"
    )
    p.add_argument("--out-dir", required=True, help="folder for the summary CSV/Markdown tables")
    writes(
        p,
        "--out-section",
        files=lambda a: [
            ("--out-dir", os.path.join(a.out_dir, f"{n}.csv"))
            for n in ("metrics", "compare", "mean_ece")
        ],
    )
    p.set_defaults(func=_cmd_report)
