"""Verb ``plot-reliability``: reliability diagrams of fitted calibrators
(:func:`calbench.steps.plot_reliability`)."""

from __future__ import annotations

import argparse

from calbench.cli._args import (
    add_allow_other_logits,
    add_logits_split,
    add_plot_options,
    load_named_plugins,
    plot_options,
    writes,
)


def _cmd_plot(args: argparse.Namespace) -> int:
    load_named_plugins(args, metrics=False)  # before the library reads the registries
    from calbench.steps import plot_reliability  # lazy: cli start-up

    plot_reliability(
        args.logits,
        args.split,
        args.calibrator,
        args.out,
        grid=args.grid,
        half=args.half,
        allow_other_logits=args.allow_other_logits,
        **plot_options(args),
    )
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "plot-reliability",
        help="reliability diagram of one calibrator, or a grid of several (--grid)",
        description="Reliability diagram(s) of calibrated probabilities on one half (default test).",
    )
    add_logits_split(p)
    p.add_argument("--calibrator", nargs="+", required=True, help="calibrator .json file(s)")
    p.add_argument("--grid", action="store_true", help="one panel per calibrator in one figure")
    p.add_argument("--half", default="test", help="test or val (default test)")
    add_plot_options(p)
    add_allow_other_logits(p)
    p.add_argument("--out", required=True, help="image to write (.png, .pdf, .svg)")
    writes(p, "--out")
    p.set_defaults(func=_cmd_plot)
