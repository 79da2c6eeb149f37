"""Verbs ``check-calibrator`` and ``check-metric``: the conformance suite
(:mod:`calbench.conformance`) for one calibrator or metric, built-in or plug-in, each check
printed as it completes; exit status 1 when any check fails. Hand-only (no workflow rule).
"""

from __future__ import annotations

from calbench.cli._args import load_named_plugins, parse_json_arg


def register(sub) -> None:
    p = sub.add_parser(
        "check-calibrator",
        help="run the conformance suite on a calibrator (built-in, entry point or module:Class)",
    )
    p.add_argument("name", help="registry name, plug-in entry point name or module:Class")
    p.add_argument("--params", default=None, help="hyperparameters as a JSON object, or @file.json")
    p.add_argument("--no-timing", action="store_true", help="skip the 5,000 x 10 / x 100 fit times")
    _timeout_option(p)
    p.set_defaults(func=cmd_check_calibrator)
    p = sub.add_parser(
        "check-metric",
        help="run the conformance suite on a metric (built-in, entry point or module:function)",
    )
    p.add_argument("name", help="registry name, plug-in entry point name or module:function")
    p.add_argument("--no-timing", action="store_true", help="skip the 5,000 x 10 / x 100 times")
    _timeout_option(p)
    p.set_defaults(func=cmd_check_metric)
    p = sub.add_parser(
        "compare-implementations",
        help="the largest differences between implementations of one method (calbench vs adapters)",
    )
    p.add_argument("--calibrators", required=True, help="comma-separated names, e.g. ts,netcal.ts")
    p.add_argument("--metrics", default="ece,nll,brier,accuracy", help="comma-separated metrics")
    p.add_argument(
        "--logits", help="logits .npz (fit on the validation half, compare on the test half)"
    )
    p.add_argument("--split", help="split .npz of --logits")
    p.add_argument("--synthetic", help="NxK: synthetic over-confident logits instead of --logits")
    p.add_argument("--seed", type=int, default=0, help="seed of --synthetic")
    p.add_argument(
        "--params",
        help='hyperparameters per calibrator as a JSON object {"name": {...}}, or @file.json',
    )
    p.add_argument("--csv", required=True, help="output CSV")
    p.add_argument("--html", help="output HTML table (a fragment for the report)")
    p.set_defaults(func=cmd_compare_implementations)


def _timeout_option(p) -> None:
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="most seconds one check may run; a check past it fails, naming it, and ends the "
        "suite (0: no limit; default 600)",
    )


def cmd_check_calibrator(args) -> int:
    from calbench.conformance import calibrator_checks, run  # lazy: cli start-up

    params = parse_json_arg(args.params, "--params") if args.params else {}
    print(f"calbench check-calibrator {args.name}")
    checks = calibrator_checks(args.name, params, timing=not args.no_timing, timeout=args.timeout)
    ok = run(checks)
    print(f"{args.name}: {'conforms' if ok else 'FAILS the conformance suite'}")
    return 0 if ok else 1


def cmd_check_metric(args) -> int:
    from calbench.conformance import metric_checks, run  # lazy: cli start-up

    print(f"calbench check-metric {args.name}")
    ok = run(metric_checks(args.name, timing=not args.no_timing, timeout=args.timeout))
    print(f"{args.name}: {'conforms' if ok else 'FAILS the conformance suite'}")
    return 0 if ok else 1


def cmd_compare_implementations(args) -> int:
    load_named_plugins(args)  # before the library reads the registries
    from calbench.arena import run_comparison  # lazy: cli start-up

    synthetic = None
    if args.synthetic:
        try:
            n, k = (int(x) for x in args.synthetic.lower().split("x"))
        except ValueError:
            raise ValueError(
                f"--synthetic must be NxK like 5000x10, got {args.synthetic!r}"
            ) from None
        synthetic = (n, k)
    if args.logits and not args.split:
        raise ValueError("--logits needs --split (the validation / test halves)")
    params = parse_json_arg(args.params, "--params") if args.params else None
    if params is not None and not (
        isinstance(params, dict) and all(isinstance(v, dict) for v in params.values())
    ):
        raise ValueError('--params must be a JSON object {"calibrator": {"param": value}}')
    rows = run_comparison(
        [c for c in args.calibrators.split(",") if c],
        [m for m in args.metrics.split(",") if m],
        args.csv,
        args.html,
        logits=args.logits,
        split=args.split,
        synthetic=synthetic,
        seed=args.seed,
        params=params,
    )
    for r in sorted(rows, key=lambda r: -r["max_abs_diff"])[:10]:
        print(f"{r['method']}: {r['a']} vs {r['b']} {r['quantity']}: {r['max_abs_diff']:.3g}")
    return 0
