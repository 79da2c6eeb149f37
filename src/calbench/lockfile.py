"""Pin-on-first-use checksums for downloaded files that nobody published a checksum for.

A downloaded file is trusted only when its SHA-256 matches a pin. Where the publisher gave one
(``sha256:`` in the config) that pin is used. Where nobody did, the digest and size of the first
download are recorded in a lock file, ``<resources>/checksums.lock`` (JSON, one entry per file,
keyed by the file's path relative to ``<resources>``), and every later download or load of that
file is verified against it. The first download itself cannot be checked: such files are
*pinned on first use* and are listed as such by ``calbench stage --dry-run`` and in the report's
provenance. ``strict=True`` (config ``strict_checksums: true``, CLI ``--strict-checksums``)
refuses files without a published pin instead.

One mechanism for every download (checkpoints, hub code archives, published logits)::

    lock = Lock(resources / LOCK_NAME)
    lock.check(key, path, published=None, source=url, strict=False)  # record or verify

A pin on first use must come from the configured source (a download from the entry's own URLs
or service) or from a file the caller proved right (a checkpoint that loads strictly into its
architecture, logits that parse in the entry's format and shapes): the callers decide, and
:meth:`Lock.record` never replaces an existing pin unless told to (``replace=True``: re-pinning on
purpose, ``--repin``). The file is updated under an exclusive ``fcntl`` lock, so parallel workflow jobs that download
different files into one ``resources/`` do not lose each other's entries.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

from calbench.io import atomic_write_text, file_digest

#: File name of the lock file inside a resources folder.
LOCK_NAME = "checksums.lock"
_VERSION = 1


class PinError(ValueError):
    """A file does not match its recorded pin, or strict mode refuses an unpinned file."""


def lock_key(path: str | os.PathLike, resources: str | os.PathLike) -> str:
    """The lock-file key of ``path``: its POSIX path relative to ``resources`` (absolute path
    when it lies outside)."""
    p = Path(os.path.abspath(path))
    root = Path(os.path.abspath(resources))
    try:
        return p.relative_to(root).as_posix()
    except ValueError:
        return p.as_posix()


class Lock:
    """The lock file at ``path`` (need not exist yet)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    # --- reading ---------------------------------------------------------------------------
    def entries(self) -> dict[str, dict]:
        """``{key: {"sha256", "size", "source"}}``; ``{}`` when the file does not exist."""
        if not self.path.is_file():
            return {}
        try:
            doc = json.loads(self.path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise PinError(
                f"lock file {self.path} is not valid JSON ({exc}); restore it from version control "
                "or delete it to pin every unpinned file again on its next download"
            ) from None
        files = doc.get("files") if isinstance(doc, dict) else None
        if not isinstance(files, dict) or any(
            not isinstance(v, dict) or not isinstance(v.get("sha256"), str) for v in files.values()
        ):
            raise PinError(
                f"lock file {self.path} lacks a 'files' mapping of {{sha256, size}} entries; "
                "restore it or delete it"
            )
        return files

    def get(self, key: str) -> dict | None:
        return self.entries().get(key)

    # --- writing ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        guard = self.path.with_name("." + self.path.name + ".guard")  # hidden: not staged
        with open(guard, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def record(
        self, key: str, path: str | os.PathLike, source: str = "", *, replace: bool = False
    ) -> dict:
        """Pin ``path`` under ``key`` (its digest and size now); return the entry.

        An existing pin of other content is kept and :class:`PinError` raised, unless
        ``replace=True`` (a re-pin on purpose)."""
        entry = {"sha256": file_digest(path), "size": os.path.getsize(path), "source": source}
        with self._exclusive():
            files = self.entries()
            old = files.get(key)
            if old is not None and old["sha256"] != entry["sha256"] and not replace:
                raise PinError(
                    f"{key} is already pinned to sha256 {old['sha256'][:16]}... in {self.path}; "
                    "the pin is kept. Re-pin on purpose with --repin if the new file is right"
                )
            files[key] = entry
            doc = {"version": _VERSION, "files": dict(sorted(files.items()))}
            atomic_write_text(self.path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
        return entry

    # --- the one entry point ---------------------------------------------------------------
    def check(
        self,
        key: str,
        path: str | os.PathLike,
        *,
        published: str | None = None,
        source: str = "",
        strict: bool = False,
        record: bool = True,
    ) -> str:
        """Trust ``path`` or raise :class:`PinError`; return how it is pinned.

        ``published`` (a checksum someone published, already verified by the caller): returns
        ``"published"``. Else the lock entry ``key``: the file must have its size and SHA-256
        (returns ``"first-use"``). No entry: ``strict`` refuses; otherwise the file is recorded
        (``record=True``, a download) and ``"first-use"`` is returned, or ``"unpinned"`` when
        ``record=False`` (a load that must not pin).
        """
        if published:
            return "published"
        entry = self.get(key)
        if entry is None:
            if strict:
                raise PinError(
                    f"{key} has no published checksum and strict checksums are on; add its "
                    f"sha256 to the config, or turn strict mode off to pin it on first use"
                )
            if not record:
                return "unpinned"
            self.record(key, path, source)
            return "first-use"
        size = os.path.getsize(path)
        if entry.get("size") is not None and size != entry["size"]:
            raise PinError(
                f"{path} has {size} bytes but {self.path} pinned {entry['size']} on first use; "
                f"delete the file and fetch it again, or re-pin on purpose (--repin) if the source "
                "really changed"
            )
        digest = file_digest(path)
        if digest != entry["sha256"]:
            raise PinError(
                f"{path} has sha256 {digest[:16]}... but {self.path} pinned "
                f"{entry['sha256'][:16]}... on first use; delete the file and fetch it again, or "
                "re-pin on purpose (--repin) if the source really changed"
            )
        return "first-use"


def pin_status(key: str, published: str | None, resources: str | os.PathLike) -> str:
    """``"published"``, ``"first-use"`` (in the lock file) or ``"unpinned"`` (not yet fetched)
    for display (``calbench stage --dry-run``, the report's provenance)."""
    if published:
        return "published"
    return "first-use" if Lock(Path(resources) / LOCK_NAME).get(key) else "unpinned"
