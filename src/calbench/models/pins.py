"""Checksums of downloaded model files: the published ``sha256`` of a registry entry or, where
none is published, the SHA-256 recorded in ``<resources>/checksums.lock`` when the file was first
fetched (:mod:`calbench.lockfile`; "pinned on first use"), checked on every later download and
load; and the report's summary of how every file is trusted (:func:`checksum_provenance`).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from calbench._paths import confined
from calbench.data.download import ChecksumError, fetch, fetch_origin, verify
from calbench.io import atomic_path
from calbench.lockfile import LOCK_NAME, Lock, PinError, lock_key
from calbench.models.entries import SOURCES, archive_path, checkpoint_path


def verify_file(
    path: str | os.PathLike,
    sha256: str | None = None,
    *,
    resources: str | os.PathLike = "resources",
) -> str:
    """Verify against the pinned ``sha256`` or else the record in ``<resources>/checksums.lock``
    (if any); return the pin status (``published``, ``first-use`` or ``unpinned``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist; run `calbench download-checkpoint` or `calbench stage`"
        )
    if sha256:
        verify(path, sha256=sha256)
        return "published"
    try:
        return resources_lock(resources).check(lock_key(path, resources), path, record=False)
    except PinError as exc:
        raise ChecksumError(f"{exc} (digest recorded when the file was first fetched)") from None


def resources_lock(resources: str | os.PathLike) -> Lock:
    """The lock file of ``resources`` (``<resources>/checksums.lock``)."""
    return Lock(Path(resources) / LOCK_NAME)


def refuse_unpinned(what: str, fix: str) -> PinError:
    """The strict-mode error for a file without a published checksum."""
    return PinError(
        f"{what} has no published sha256 and strict checksums are on; {fix}, or turn strict "
        "mode off (strict_checksums: false / no --strict-checksums) to pin it on first use"
    )


def fetch_pinned(
    target: Path,
    key: str,
    lock: Lock,
    pin: str | None,
    *,
    prove: Callable[[Path], None] | None = None,
    local_file: Path | None = None,
    repin: bool = False,
    **fetch_kwargs,
) -> tuple[Path, str]:
    """:func:`fetch` against the published ``pin``, else the lock file's record of ``key``.

    Without either (or with ``repin``, a re-pin on purpose) the file is pinned only when it comes
    from the configured source (``urls``: downloaded now) or ``prove(path)`` accepts it (a local
    ``local_file``, a file in a mirror directory, or one already lying at ``target``);
    ``prove`` raises :class:`PinError` otherwise, and then nothing is placed or pinned. A re-pin
    replaces an existing record and says so on stderr."""
    if repin and pin:
        raise PinError(
            f"{key} has a published checksum in the config; --repin applies only to files pinned "
            "on first use (edit the config's sha256 to change a published one)"
        )
    recorded = None if pin else (lock.get(key) or {}).get("sha256")
    if pin or (recorded and not repin):
        try:
            if local_file is not None and not target.exists():
                fetch_kwargs = {**fetch_kwargs, "mirrors": [local_file.parent], "urls": ()}
                fetch_kwargs["filename"] = local_file.name
            fetched = fetch(target, sha256=pin or recorded, **fetch_kwargs)
            if local_file is not None and target.exists():
                verify(local_file, sha256=pin or recorded)  # the file the user named, too
        except (FileNotFoundError, ChecksumError) as exc:
            if recorded:
                raise type(exc)(
                    f"{exc} (pinned on first use in {lock.path}; re-pin on purpose with --repin "
                    "if the source really changed)"
                ) from None
            raise
        source = ", ".join(fetch_kwargs.get("urls") or ()) or str(
            fetch_kwargs.get("filename") or ""
        )
        return fetched, lock.check(key, fetched, published=pin, source=source)
    # first use, or a re-pin on purpose: where does the file come from?
    name = fetch_kwargs.get("filename") or target.name
    local = local_file
    if local is None and target.is_file():
        local = target
    if local is None:
        for mirror in fetch_kwargs.get("mirrors") or ():
            candidate = confined(
                Path(mirror).expanduser(),
                name,
                fetch_kwargs.get("name_key", "filename"),
                plain=True,
            )
            if candidate.is_file():
                local = candidate
                break
    if local is not None:
        if prove is None:
            raise PinError(
                f"{local} has no published checksum and is not from the configured source; "
                "nothing was pinned: download it from its URL, or add its sha256 to the config"
            )
        prove(local)  # PinError: nothing placed, nothing pinned
        if Path(os.path.abspath(local)) != Path(os.path.abspath(target)):
            with atomic_path(target) as tmp:
                shutil.copyfile(local, tmp)
        origin = f"local {local}" + (" (re-pinned on purpose)" if repin else " (checked)")
    else:
        fetched, origin = fetch_origin(target, **{**fetch_kwargs, "mirrors": ()}, unpinned=True)
    old = lock.get(key)
    entry = lock.record(key, target, origin, replace=repin)
    if old is not None and old["sha256"] != entry["sha256"]:
        print(
            f"re-pinned {key}: sha256 {old['sha256'][:16]}... -> {entry['sha256'][:16]}... "
            f"in {lock.path}",
            file=sys.stderr,
        )
    return target, "first-use"


def checksum_provenance(config: Mapping, planners: Mapping | None = None) -> dict:
    """How every downloaded file of ``config`` (a workflow configuration or registry) is
    trusted, for the report: ``{"published": n, "files": [{"model", "file", "status",
    "sha256"}]}`` where ``files`` lists those *without* a published checksum, status ``pinned on
    first use`` (SHA-256 recorded in ``<resources>/checksums.lock``) or ``not pinned`` (not yet
    fetched, or a local file read as it is).

    The files of an entry whose ``source`` is a key of ``planners`` (``{source: plan(name, entry,
    resources) -> [{"dest", "pin"}]}``, the caller's: ``source: logits`` is
    :func:`calbench.logits_sources.plan_files`, a layer this package does not import) are that
    function's; an entry of another source that is neither this package's nor ``train`` is a
    one-line error, never left out."""
    resources = Path(config.get("resources") or "resources")
    lock = Lock(resources / LOCK_NAME)
    published, files = 0, []

    def add(model: str, path: Path, pin: str | None) -> None:
        nonlocal published
        if pin:
            published += 1
            return
        entry = lock.get(lock_key(path, resources))
        files.append(
            {
                "model": model,
                "file": lock_key(path, resources),
                "status": "pinned on first use" if entry else "not pinned",
                "sha256": entry["sha256"] if entry else "",
            }
        )

    for name, entry in (config.get("models") or {}).items():
        entry = entry or {}
        source = entry.get("source")
        ckpt = entry.get("checkpoint") or {}
        if source in (planners or {}):
            for f in planners[source](name, entry, resources):
                add(name, Path(f["dest"]), "published" if f["pin"] == "pinned" else None)
        elif source not in (None, *SOURCES, "train"):  # None: an entry naming no download
            raise ValueError(
                f"model {name}: no file planner for source {source!r}; pass "
                f"planners={{{source!r}: ...}} (source logits: calbench.logits_sources.plan_files)"
            )
        elif source in SOURCES and ckpt:
            if ckpt.get("archive_member"):
                add(name, archive_path(entry, resources, name), ckpt.get("sha256"))
            add(
                name,
                checkpoint_path(name, entry, resources),
                ckpt.get("member_sha256") or ckpt.get("sha256"),
            )
            if source == "torchhub":  # the archive stage_hub_code fetches (no torch import)
                hub = entry.get("hub") or {}
                stem = f"{hub.get('repo', '').replace('/', '_')}_{hub.get('ref')}"
                add(name, resources / "hub" / f"{stem}.zip", hub.get("archive_sha256"))
    seen, unique = set(), []
    for f in files:  # shared archives once
        if f["file"] not in seen:
            seen.add(f["file"])
            unique.append(f)
    return {"published": published, "files": unique}
