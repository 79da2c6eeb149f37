"""Verbs ``download-checkpoint`` and ``stage``: published weights, hub code and datasets, offline-ready.

``calbench download-checkpoint --config C --model M`` places one model's verified weights under
``resources/checkpoints/<dataset>/<model>/``. ``calbench stage --config C`` fetches everything the
configuration needs (weights, pinned torch.hub code, dataset archives) into ``resources/`` and
writes ``resources/SHA256SUMS`` so the folder can be copied to an air-gapped machine and checked
there with ``sha256sum -c``. Directories given with ``--mirror`` (or ``mirrors:`` in the
config) are searched for local copies before any URL.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        required=True,
        help="registry YAML with a models: mapping (config/coursework.yaml)",
    )
    p.add_argument(
        "--resources",
        default=None,
        help="resources folder (default: config 'resources' or ./resources)",
    )
    p.add_argument(
        "--mirror",
        action="append",
        default=[],
        metavar="DIR",
        help="directory holding local copies of files under their registry names (repeatable)",
    )
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per download attempt")


def register(sub) -> None:
    p = sub.add_parser("download-checkpoint", help="fetch and verify one model's published weights")
    _common(p)
    p.add_argument("--model", required=True, help="registry name, e.g. c10_resnet18")
    p.add_argument(
        "--file", default=None, help="a copy you downloaded yourself (the file or its archive)"
    )
    p.set_defaults(func=cmd_download_checkpoint)

    p = sub.add_parser(
        "stage", help="fetch everything a configuration needs into resources/ for offline use"
    )
    _common(p)
    p.add_argument("--models", default=None, help="comma-separated registry names (default: all)")
    p.add_argument("--skip-datasets", action="store_true", help="weights and hub code only")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be fetched and where, fetch nothing",
    )
    p.set_defaults(func=cmd_stage)


def _setup(args):
    from calbench.models.pretrained import load_registry

    doc = load_registry(args.config)
    resources = Path(args.resources or doc.get("resources") or "resources")
    mirrors = [*args.mirror, *(doc.get("mirrors") or [])]
    return doc, resources, mirrors


def cmd_download_checkpoint(args) -> int:
    from calbench.models.pretrained import download_checkpoint, get_entry, stage_hub_code

    doc, resources, mirrors = _setup(args)
    entry = get_entry(doc, args.model)
    if not entry.get("checkpoint"):
        raise ValueError(
            f"model {args.model} has no checkpoint in the registry (source {entry['source']})"
        )
    path = download_checkpoint(
        args.model, entry, resources, mirrors, local_file=args.file, timeout=args.timeout
    )
    if entry["source"] == "torchhub":
        stage_hub_code(entry, resources, mirrors, timeout=args.timeout)
    print(path)
    return 0


def plan(
    doc: dict, resources: Path, names: list[str], datasets: bool = True
) -> list[tuple[str, str, Path]]:
    """``(kind, name, destination)`` for everything :func:`cmd_stage` would place."""
    from calbench.models.pretrained import (
        archive_path,
        checkpoint_path,
        get_entry,
        hub_dir_candidates,
    )

    out, seen = [], set()
    for name in names:
        e = get_entry(doc, name)
        if e.get("checkpoint"):
            if e["checkpoint"].get("archive_member"):
                a = archive_path(e, resources)
                if a not in seen:
                    seen.add(a)
                    out.append(("archive", name, a))
            out.append(("checkpoint", name, checkpoint_path(name, e, resources)))
        if e["source"] == "torchhub":
            h = hub_dir_candidates(e, resources)[0]
            if h not in seen:
                seen.add(h)
                out.append(("hub", name, h))
        if datasets and e["dataset"] not in seen:
            seen.add(e["dataset"])
            out.append(("dataset", e["dataset"], resources / "datasets" / e["dataset"]))
    return out


def cmd_stage(args) -> int:
    from calbench.data import cifar, tiny_imagenet
    from calbench.data.imagenet import DEVKIT, VAL_ARCHIVE
    from calbench.io import atomic_write_text, file_digest
    from calbench.models.pretrained import download_checkpoint, get_entry, stage_hub_code

    doc, resources, mirrors = _setup(args)
    names = args.models.split(",") if args.models else list(doc["models"])
    steps = plan(doc, resources, names, datasets=not args.skip_datasets)
    failures = []
    for kind, name, dest in steps:
        if args.dry_run:
            print(f"{kind:10s} {name:32s} -> {dest}")
            continue
        try:
            if kind == "checkpoint":
                download_checkpoint(
                    name, get_entry(doc, name), resources, mirrors, timeout=args.timeout
                )
            elif kind == "hub":
                stage_hub_code(get_entry(doc, name), resources, mirrors, timeout=args.timeout)
            elif kind == "dataset" and name in cifar.SPECS:
                cifar.download_cifar(name, dest, mirrors, timeout=args.timeout)
            elif kind == "dataset" and name == "tiny_imagenet":
                tiny_imagenet.download_tiny_imagenet(dest, mirrors, timeout=args.timeout)
            elif kind == "dataset" and name == "imagenet":
                print(
                    f"imagenet: not downloadable (registration); copy {VAL_ARCHIVE} and {DEVKIT} "
                    "yourself and set datasets.imagenet.path",
                    file=sys.stderr,
                )
            print(f"ok {kind} {name}")
        except (OSError, ValueError) as exc:
            failures.append(f"{kind} {name}: {exc}")
            print(f"FAILED {kind} {name}: {exc}", file=sys.stderr)
    if args.dry_run:
        return 0
    files = sorted(
        p
        for p in resources.rglob("*")
        if p.is_file()
        and p.name != "SHA256SUMS"
        and not p.name.endswith(".sha256")
        and not any(
            part.endswith(".partial") or part.startswith(".")
            for part in p.relative_to(resources).parts
        )
    )
    lines = [f"{file_digest(p)}  {p.relative_to(resources).as_posix()}" for p in files]
    if lines:
        atomic_write_text(resources / "SHA256SUMS", "\n".join(lines) + "\n")
        print(f"wrote {resources / 'SHA256SUMS'} ({len(lines)} files)")
    if failures:
        raise ValueError(
            f"{len(failures)} item(s) could not be staged (first: {failures[0]}); "
            "put local copies in a --mirror directory and run stage again"
        )
    return 0
