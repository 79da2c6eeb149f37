"""Verb ``stage``: every download a configuration needs, fetched into ``resources/`` for an
air-gapped machine (:mod:`calbench.stage`), with ``resources/SHA256SUMS``; ``--dry-run`` lists
every item with its size and how its checksum is pinned. Hand-only (no workflow rule): the
workflow downloads the same files itself, with the same code, when a step needs them.
"""

from __future__ import annotations

from calbench.cli._args import add_download_options, download_setup


def register(sub) -> None:
    p = sub.add_parser(
        "stage", help="fetch everything a configuration needs into resources/ for offline use"
    )
    add_download_options(p)
    p.add_argument("--models", default=None, help="comma-separated model names (default: all)")
    p.add_argument("--skip-datasets", action="store_true", help="weights and hub code only")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be fetched, its size and where, fetch nothing",
    )
    p.set_defaults(func=cmd_stage)


def cmd_stage(args) -> int:
    from calbench.stage import dry_run_lines, plan, stage  # lazy: cli start-up

    doc, resources, mirrors = download_setup(args)
    names = args.models.split(",") if args.models else list(doc["models"])
    steps = plan(doc, resources, names, datasets=not args.skip_datasets)
    strict = args.strict_checksums or bool(doc.get("strict_checksums"))
    if args.dry_run:
        print("\n".join(dry_run_lines(doc, resources, names, steps, strict)))
        return 0
    stage(doc, resources, mirrors, steps, timeout=args.timeout, strict=strict)
    return 0
