"""Staging every download a configuration needs, for air-gapped machines: verb ``stage``.

:func:`plan` lists the items (datasets, checkpoints and their archives, pinned torch.hub code,
logits files) with their sizes; :func:`stage` places them with the workflow's own code
(:func:`calbench.models.staging.stage_model`, :func:`calbench.data.prepare.prepare_dataset`,
:func:`calbench.logits_sources.obtain`), so a staged ``resources/`` is exactly what the workflow
would have downloaded, and writes ``resources/SHA256SUMS`` for ``sha256sum -c`` on the other
machine; :func:`dry_run_lines` says what would be fetched and how each file is pinned.
"""

from __future__ import annotations

import sys
from pathlib import Path

from calbench.data import get_dataset
from calbench.data.prepare import dataset_options, prepare_dataset
from calbench.io import atomic_write_text, file_digest
from calbench.lockfile import lock_key, pin_status
from calbench.models.entries import archive_path, checkpoint_path, get_entry, hub_dir_candidates
from calbench.models.staging import stage_model


def _mb(value) -> str:
    return "?" if value is None else f"{float(value):,.0f} MB"


def plan(
    doc: dict, resources: Path, names: list[str], datasets: bool = True
) -> list[tuple[str, str, Path, float | None]]:
    """``(kind, name, destination, size in MB or None)`` for everything :func:`stage` places,
    in order; shared archives and hub checkouts appear once."""
    out, seen = [], set()
    for name in names:
        e = get_entry(doc, name)
        if e.get("source") == "train":
            continue  # trained by the workflow; nothing to fetch but its dataset
        if e.get("source") == "logits":  # published / user logits files (calbench.logits_sources)
            from calbench.logits_sources import plan_files  # lazy: pulls numpy

            for f in plan_files(name, e, resources):
                if f["dest"] in seen:  # a file several models read (a CalArena benchmark)
                    continue
                seen.add(f["dest"])
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
    from calbench.logits_sources import plan_files  # lazy: pulls numpy

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
    pins = {}
    for kind, name, dest, _ in steps:
        if kind not in ("checkpoint", "archive", "hub"):
            continue
        status = pin_of(kind, get_entry(doc, name), dest, resources)
        if status:
            pins[dest] = PIN_WORDS[status]
    return pins


def dry_run_lines(doc: dict, resources: Path, names: list[str], steps, strict: bool) -> list[str]:
    """What ``stage --dry-run`` prints: one line per item (kind, model, size, destination, pin)
    and the totals."""
    lines = []
    total = 0.0
    pins = _logits_pins(doc, resources, names)
    logits_pins = dict(pins)
    ckpt_pins = checkpoint_pins(doc, resources, steps)
    pins.update(ckpt_pins)
    for kind, name, dest, size in steps:
        pin = f"  [{pins[dest]}]" if dest in pins else ""
        lines.append(f"{kind:10s} {name:28s} {_mb(size):>10s}  -> {dest}{pin}")
        total += size or 0.0
    if logits_pins:
        words = list(logits_pins.values())
        counts = {p: words.count(p) for p in dict.fromkeys(words)}
        lines.append("logits files: " + ", ".join(f"{n} {p}" for p, n in counts.items()))
    unpinned = [d for d, p in ckpt_pins.items() if p != PIN_WORDS["published"]]
    if unpinned:
        what = "refused (strict checksums)" if strict else "trusted on first use"
        lines.append(
            f"{len(unpinned)} checkpoint file(s) without a published checksum, {what}: "
            + ", ".join(str(d) for d in unpinned)
        )
    unknown = sum(1 for kind, _, _, size in steps if size is None and kind != "checkpoint")
    lines.append(
        f"{len(steps)} item(s), about {total / 1024:.1f} GB to download"
        + (f" (+{unknown} of unlisted size)" if unknown else "")
    )
    return lines


def stage(
    doc: dict, resources: Path, mirrors: list, steps, *, timeout: float = 60.0, strict: bool = False
) -> Path | None:
    """Place every item of ``steps`` (:func:`plan`) under ``resources`` with the workflow's own
    code (the same files the workflow would download), then write ``resources/SHA256SUMS``.

    Progress goes to stdout (``ok kind name``) and stderr (``FAILED ...``); a failed item does
    not stop the others, and the first failure is raised at the end as one error. Returns the
    SHA256SUMS path (``None`` when nothing was placed)."""
    failures, staged_logits = [], set()
    for kind, name, dest, _size in steps:
        try:
            if kind == "logits":
                if name in staged_logits:
                    continue  # one obtain() per model places its file and targets.txt
                from calbench.logits_sources import obtain  # lazy: pulls numpy

                staged_logits.add(name)
                obtain(
                    name, get_entry(doc, name), resources, mirrors, timeout=timeout, strict=strict
                )
            elif kind == "checkpoint":
                stage_model(
                    name, get_entry(doc, name), resources, mirrors, timeout=timeout, strict=strict
                )
            elif kind == "dataset":
                entry = (doc.get("datasets") or {}).get(name) or {}
                prepare_dataset(
                    entry.get("name", name),
                    entry.get("root") or dest,
                    entry=entry,
                    mirrors=mirrors,
                    timeout=timeout,
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
    sums = None
    if lines:
        sums = resources / "SHA256SUMS"
        atomic_write_text(sums, "\n".join(lines) + "\n")
        print(f"wrote {sums} ({len(lines)} files)")
    if failures:
        raise ValueError(
            f"{len(failures)} item(s) could not be staged (first: {failures[0]}); "
            "put local copies in a --mirror directory and run stage again"
        )
    return sums
