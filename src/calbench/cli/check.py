"""Verbs ``check-calibrator`` and ``check-metric``: the conformance suite
(:mod:`calbench.conformance`) for one calibrator or metric, built-in or plug-in, each check
printed as it completes; exit status 1 when any check fails. Hand-only (no workflow rule).
"""

from __future__ import annotations

from calbench.cli._args import parse_json_arg


def register(sub) -> None:
    p = sub.add_parser(
        "check-calibrator",
        help="run the conformance suite on a calibrator (built-in, entry point or module:Class)",
    )
    p.add_argument("name", help="registry name, plug-in entry point name or module:Class")
    p.add_argument("--params", default=None, help="hyperparameters as a JSON object, or @file.json")
    p.add_argument("--no-timing", action="store_true", help="skip the 5,000 x 10 / x 100 fit times")
    p.set_defaults(func=cmd_check_calibrator)
    p = sub.add_parser(
        "check-metric",
        help="run the conformance suite on a metric (built-in, entry point or module:function)",
    )
    p.add_argument("name", help="registry name, plug-in entry point name or module:function")
    p.add_argument("--no-timing", action="store_true", help="skip the 5,000 x 10 / x 100 times")
    p.set_defaults(func=cmd_check_metric)


def cmd_check_calibrator(args) -> int:
    from calbench.conformance import calibrator_checks, run  # lazy: cli start-up

    params = parse_json_arg(args.params, "--params") if args.params else {}
    print(f"calbench check-calibrator {args.name}")
    ok = run(calibrator_checks(args.name, params, timing=not args.no_timing))
    print(f"{args.name}: {'conforms' if ok else 'FAILS the conformance suite'}")
    return 0 if ok else 1


def cmd_check_metric(args) -> int:
    from calbench.conformance import metric_checks, run  # lazy: cli start-up

    print(f"calbench check-metric {args.name}")
    ok = run(metric_checks(args.name, timing=not args.no_timing))
    print(f"{args.name}: {'conforms' if ok else 'FAILS the conformance suite'}")
    return 0 if ok else 1
