"""Verbs ``download-checkpoint``, ``stage`` and ``reference-csv``: published weights, hub code,
datasets and published numbers, offline-ready.

``calbench download-checkpoint --spec JSON --out resources/checkpoints/<dataset>/<model>/checkpoint.pt``
is the workflow's ``download_checkpoint`` rule: the model's own config entry in, one verified
weights file out (plus the pinned torch.hub code for ``source: torchhub``). By hand,
``--config C --model M`` reads the entry from a configuration and writes the same path.
``calbench stage --config C`` runs the same code (:func:`calbench.models.pretrained.stage_model`
and :func:`calbench.cli.data.prepare_dataset`) for everything the configuration needs, so a
staged ``resources/`` is exactly what the workflow would have downloaded; it writes
``resources/SHA256SUMS`` so the folder can be copied to an air-gapped machine and checked there
with ``sha256sum -c``. ``--dry-run`` lists every item with its size. Directories given with
``--mirror`` (or ``mirrors:`` in the config) are searched for local copies before any URL.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _common(p: argparse.ArgumentParser, config_required: bool = True) -> None:
    p.add_argument(
        "--config",
        required=config_required,
        help="workflow configuration / registry YAML with a models: mapping (config/coursework.yaml)",
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
    p.add_argument(
        "--strict-checksums",
        action="store_true",
        help="refuse files without a published sha256 (default: pin them on first use in "
        "<resources>/checksums.lock; config key strict_checksums)",
    )


def register(sub) -> None:
    p = sub.add_parser("download-checkpoint", help="fetch and verify one model's published weights")
    _common(p, config_required=False)
    p.add_argument("--model", default=None, help="model name in --config, e.g. c10_resnet18")
    p.add_argument(
        "--spec", default=None, help="the model's config entry as JSON (the workflow's form)"
    )
    p.add_argument(
        "--out",
        default=None,
        help="weights file to write (default resources/checkpoints/<dataset>/<model>/checkpoint.pt)",
    )
    p.add_argument(
        "--file", default=None, help="a copy you downloaded yourself (the file or its archive)"
    )
    p.set_defaults(func=cmd_download_checkpoint)

    p = sub.add_parser(
        "stage", help="fetch everything a configuration needs into resources/ for offline use"
    )
    _common(p)
    p.add_argument("--models", default=None, help="comma-separated model names (default: all)")
    p.add_argument("--skip-datasets", action="store_true", help="weights and hub code only")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be fetched, its size and where, fetch nothing",
    )
    p.set_defaults(func=cmd_stage)

    p = sub.add_parser(
        "reference-csv",
        help="write a packaged table of published numbers as the workflow's reference CSV",
    )
    p.add_argument("--name", default="coursework_2021", help="packaged table (coursework_2021)")
    p.add_argument("--out", required=True, help="CSV to write: dataset,model,method,metric,value")
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
    p.set_defaults(func=cmd_replication_tables)


def _setup(args):
    from calbench.models.pretrained import load_registry

    doc = load_registry(args.config)
    resources = Path(args.resources or doc.get("resources") or "resources")
    mirrors = [*args.mirror, *(doc.get("mirrors") or [])]
    return doc, resources, mirrors


def _model_from_out(out: str) -> str:
    """``resources/checkpoints/<dataset>/<model>/checkpoint.pt`` -> ``<model>``."""
    return Path(out).parent.name or "model"


def cmd_download_checkpoint(args) -> int:
    from calbench.models import parse_spec
    from calbench.models.pretrained import check_entry, get_entry, stage_model

    if args.spec is not None:
        if args.config or args.model:
            raise ValueError("pass either --spec (with --out) or --config with --model, not both")
        if not args.out:
            raise ValueError("--spec needs --out (the checkpoint file to write)")
        entry = parse_spec(args.spec)
        name = _model_from_out(args.out)
        check_entry(name, entry)
        resources = Path(args.resources or "resources")
        mirrors = list(args.mirror)
    elif args.config and args.model:
        doc, resources, mirrors = _setup(args)
        name = args.model
        entry = get_entry(doc, name)
    else:
        raise ValueError(
            "say which model: --spec JSON --out FILE (workflow) or --config C --model M (by hand)"
        )
    path = stage_model(
        name,
        entry,
        resources,
        mirrors,
        local_file=args.file,
        timeout=args.timeout,
        out=args.out,
        strict=args.strict_checksums,
    )
    print(path)
    return 0


def _mb(value) -> str:
    return "?" if value is None else f"{float(value):,.0f} MB"


def plan(
    doc: dict, resources: Path, names: list[str], datasets: bool = True
) -> list[tuple[str, str, Path, float | None]]:
    """``(kind, name, destination, size in MB or None)`` for everything :func:`cmd_stage` places,
    in order; shared archives and hub checkouts appear once."""
    from calbench.cli.logits import dataset_options
    from calbench.data import get_dataset
    from calbench.models.pretrained import (
        archive_path,
        checkpoint_path,
        get_entry,
        hub_dir_candidates,
    )

    out, seen = [], set()
    for name in names:
        e = get_entry(doc, name)
        if e.get("source") == "train":
            continue  # trained by the workflow; nothing to fetch but its dataset
        if e.get("source") == "logits":  # published / user logits files (calbench.logits_sources)
            from calbench.logits_sources import plan_files

            for f in plan_files(name, e, resources):
                mb = f["size"] / 1e6 if f["size"] else None
                out.append(("logits", name, f["dest"], mb))
            continue
        ckpt = e.get("checkpoint") or {}
        if ckpt:
            if ckpt.get("archive_member"):
                a = archive_path(e, resources)
                if a not in seen:
                    seen.add(a)
                    out.append(("archive", name, a, ckpt.get("archive_size_mb")))
                out.append(("checkpoint", name, checkpoint_path(name, e, resources), None))
            else:
                out.append(
                    ("checkpoint", name, checkpoint_path(name, e, resources), ckpt.get("size_mb"))
                )
        if e["source"] == "torchhub":
            h = hub_dir_candidates(e, resources)[0]
            if h not in seen:
                seen.add(h)
                out.append(("hub", name, h, None))
    if datasets:
        used = list(
            dict.fromkeys(
                get_entry(doc, n)["dataset"]
                for n in names
                if get_entry(doc, n).get("source") != "logits"  # no images needed
            )
        )
        for d in used:
            entry = (doc.get("datasets") or {}).get(d) or {}
            ds = get_dataset(entry.get("name", d), dataset_options(entry) or None)
            size = sum(mb for _, mb in getattr(ds, "FILES", ())) or None
            out.append(("dataset", d, resources / "datasets" / d, size))
    return out


#: how ``stage --dry-run`` names the pin of a logits file (calbench.logits_sources.plan_files)
_PIN_WORDS = {
    "pinned": "published checksum",
    "lock": "pinned on first use (recorded)",
    "first use": "to be pinned on first use",
    "local": "local copy, nothing fetched",
}


def _logits_pins(doc: dict, resources: Path, names: list[str]) -> dict:
    """``{destination: pin wording}`` of every logits file the models ``names`` need."""
    from calbench.logits_sources import plan_files
    from calbench.models.pretrained import get_entry

    pins = {}
    for name in names:
        e = get_entry(doc, name)
        if e.get("source") == "logits":
            for f in plan_files(name, e, resources):
                pins[f["dest"]] = _PIN_WORDS[f["pin"]]
    return pins


#: how ``stage --dry-run`` names a checkpoint's pin status (calbench.lockfile)
PIN_WORDS = {
    "published": "published checksum",
    "first-use": "pinned on first use (recorded)",
    "unpinned": "to be pinned on first use",
}


def pin_of(kind: str, entry: dict, dest: Path, resources: Path) -> str | None:
    """The pin status of one staged checkpoint, archive or hub-code item: ``published``
    (checksum in the config), ``first-use`` (recorded in the lock file) or ``unpinned`` (pinned
    when first fetched); ``None`` for other kinds (datasets are pinned by their own modules)."""
    from calbench.lockfile import lock_key, pin_status

    ckpt = entry.get("checkpoint") or {}
    if kind == "archive":
        published = ckpt.get("sha256")
    elif kind == "checkpoint":
        published = ckpt.get("member_sha256") or ckpt.get("sha256")
    elif kind == "hub":
        published = (entry.get("hub") or {}).get("archive_sha256")
        dest = dest.with_name(dest.name + ".zip")
    else:
        return None
    return pin_status(lock_key(dest, resources), published, resources)


def checkpoint_pins(doc: dict, resources: Path, steps) -> dict:
    """``{destination: pin wording}`` of the checkpoint, archive and hub items of ``steps``."""
    from calbench.models.pretrained import get_entry

    pins = {}
    for kind, name, dest, _ in steps:
        if kind not in ("checkpoint", "archive", "hub"):
            continue
        status = pin_of(kind, get_entry(doc, name), dest, resources)
        if status:
            pins[dest] = PIN_WORDS[status]
    return pins


def cmd_stage(args) -> int:
    from calbench.cli.data import prepare_dataset
    from calbench.io import atomic_write_text, file_digest
    from calbench.models.pretrained import get_entry, stage_model

    doc, resources, mirrors = _setup(args)
    names = args.models.split(",") if args.models else list(doc["models"])
    steps = plan(doc, resources, names, datasets=not args.skip_datasets)
    strict = args.strict_checksums or bool(doc.get("strict_checksums"))
    if args.dry_run:
        total = 0.0
        pins = _logits_pins(doc, resources, names)
        logits_pins = dict(pins)
        ckpt_pins = checkpoint_pins(doc, resources, steps)
        pins.update(ckpt_pins)
        for kind, name, dest, size in steps:
            pin = f"  [{pins[dest]}]" if dest in pins else ""
            print(f"{kind:10s} {name:28s} {_mb(size):>10s}  -> {dest}{pin}")
            total += size or 0.0
        if logits_pins:
            words = list(logits_pins.values())
            counts = {p: words.count(p) for p in dict.fromkeys(words)}
            print("logits files: " + ", ".join(f"{n} {p}" for p, n in counts.items()))
        unpinned = [d for d, p in ckpt_pins.items() if p != PIN_WORDS["published"]]
        if unpinned:
            what = "refused (strict checksums)" if strict else "trusted on first use"
            print(
                f"{len(unpinned)} checkpoint file(s) without a published checksum, {what}: "
                + ", ".join(str(d) for d in unpinned)
            )
        unknown = sum(1 for kind, _, _, size in steps if size is None and kind != "checkpoint")
        print(
            f"{len(steps)} item(s), about {total / 1024:.1f} GB to download"
            + (f" (+{unknown} of unlisted size)" if unknown else "")
        )
        return 0
    failures, staged_logits = [], set()
    for kind, name, dest, _size in steps:
        try:
            if kind == "logits":
                if name in staged_logits:
                    continue  # one obtain() per model places its file and targets.txt
                from calbench.logits_sources import obtain

                staged_logits.add(name)
                obtain(
                    name, get_entry(doc, name), resources, mirrors, timeout=args.timeout,
                    strict=strict,
                )
            elif kind == "checkpoint":
                stage_model(
                    name,
                    get_entry(doc, name),
                    resources,
                    mirrors,
                    timeout=args.timeout,
                    strict=strict,
                )
            elif kind == "dataset":
                entry = (doc.get("datasets") or {}).get(name) or {}
                prepare_dataset(
                    entry.get("name", name),
                    entry.get("root") or dest,
                    entry=entry,
                    mirrors=mirrors,
                    timeout=args.timeout,
                    manifest=dest / "manifest.json",
                )
            else:
                continue  # archives and hub code are placed with their first model
            print(f"ok {kind} {name}")
        except (OSError, ValueError) as exc:
            failures.append(f"{kind} {name}: {exc}")
            print(f"FAILED {kind} {name}: {exc}", file=sys.stderr)
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


def cmd_reference_csv(args) -> int:
    from calbench.io import atomic_write_text
    from calbench.reference import reference_csv_text

    text = reference_csv_text(args.name)
    atomic_write_text(args.out, text)
    print(f"{args.out}: {text.count(chr(10)) - 1} published cells of {args.name}")
    return 0


def cmd_replication_tables(args) -> int:
    from calbench.cli._args import parse_json_arg
    from calbench.io import atomic_write_text
    from calbench.logits import load_logits
    from calbench.reference import compare as C
    from calbench.report.tables import METRIC_COLUMNS, REFERENCE_COLUMNS, read_long_csv

    spec = parse_json_arg(args.spec, "--spec")
    rows = read_long_csv([args.metrics], required=METRIC_COLUMNS)
    reference = read_long_csv([args.reference], required=REFERENCE_COLUMNS)
    long = C.comparison_rows(rows, reference, spec)
    tabs = C.tables(long, spec)
    accuracies = {}
    for path in args.logits:
        d = load_logits(path)
        model = Path(path).stem
        acc = float((d["logits"].argmax(1) == d["labels"]).mean())
        accuracies[model] = (int(d["labels"].shape[0]), acc)
    acc_rows = C.accuracy_check(accuracies, spec, tolerance_pp=args.accuracy_tolerance)
    atomic_write_text(args.out_csv, C.long_csv(long))
    atomic_write_text(
        args.out_accuracy,
        C.long_csv(
            acc_rows,
            ("model", "dataset", "n", "ours", "expected", "difference", "tolerance", "status"),
        ),
    )
    atomic_write_text(args.out_md, C.to_markdown(tabs, acc_rows, spec))
    atomic_write_text(args.out_html, C.to_html(tabs, acc_rows, spec))
    flagged = sum(r["status"] == C.FLAGGED for r in long)
    acc_flagged = sum(r["status"] == C.FLAGGED for r in acc_rows)
    print(
        f"{len(tabs)} tables, {len(long)} cells, {flagged} beyond tolerance; "
        f"accuracy check: {acc_flagged} of {len(acc_rows)} models off by more than "
        f"{args.accuracy_tolerance} pp"
    )
    return 0
