"""Obtaining a ``source: logits`` model's file: local copies, mirrors, the services (Yandex Disk,
Git LFS, the Hugging Face Hub), URLs; every file verified against its published pin or the lock
file before use (see :mod:`calbench.logits_sources` for the order of places tried)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from calbench._paths import confined
from calbench.io import file_digest
from calbench.lockfile import LOCK_NAME, Lock, PinError, lock_key
from calbench.logits_sources import formats
from calbench.logits_sources import services as S
from calbench.logits_sources.entry import (
    STATUS,
    TARGETS_FILE,
    check_entry,
    has_service,
    is_presplit,
    model_dir,
)

# --------------------------------------------------------------------------- verification


def _verify(
    path: Path, key: str, *, sha256, size, lock: Lock, origin: str, pin: bool, repin: bool = False
) -> dict:
    """Check ``path`` against the config's pin, else the lock file (pinning it on first use;
    ``repin``: replacing the record on purpose)."""
    actual_size = path.stat().st_size
    if size is not None and actual_size != int(size):
        raise ValueError(
            f"{path}: {actual_size} bytes, expected {size}; the file is incomplete or a different "
            "version: delete it and fetch it again"
        )
    digest = file_digest(path)
    if sha256 and digest != sha256:
        raise ValueError(
            f"{path}: sha256 {digest[:12]} does not match the pinned {sha256[:12]}; the file is "
            "corrupt or a different version: delete it and fetch it again"
        )
    if repin and pin and not sha256:
        lock.record(key, path, origin + " (re-pinned on purpose)", replace=True)
        status = "first-use"
    else:
        status = lock.check(key, path, published=sha256, source=origin, record=pin)
    return {
        "path": str(path),
        "sha256": digest,
        "size": actual_size,
        "status": STATUS[status],
        "origin": origin,
    }


# --------------------------------------------------------------------------- obtaining


def _local_lookup(where: Path, lg: Mapping, name: str) -> tuple[Path, Path | None] | None:
    """``(file, targets or None)`` in a local file/folder, or None if it is not there."""
    where = where.expanduser()
    if where.is_file():
        t = where.parent / TARGETS_FILE
        return where, (t if t.is_file() else None)
    if not where.is_dir():
        return None
    direct = confined(where, name, "logits.file", plain=True)
    if lg.get("folder"):
        try:
            hit, targets = S.find_in_tree(S.local_tree(where), lg["folder"], name, str(where))
        except FileNotFoundError:
            hit = None
        if hit is not None:
            listed = f"a file listed under {where}"
            f = confined(where, hit.path.lstrip("/"), listed)
            return f, (confined(where, targets.path.lstrip("/"), listed) if targets else None)
    if direct.is_file():
        t = where / TARGETS_FILE
        return direct, (t if t.is_file() else None)
    return None


def local_copy(
    name: str,
    entry: Mapping,
    mirrors: Iterable[str | os.PathLike] = (),
    *,
    local_file: str | os.PathLike | None = None,
) -> tuple[Path, Path | None, str] | None:
    """``(file, targets or None, origin)`` of model ``name``'s local copy, as :func:`obtain`
    reads it: ``local_file`` or ``logits.local_path`` (FileNotFoundError when the file is not
    there), else the first of ``mirrors`` holding it; ``None`` when neither is set or holds it
    (the file is then kept under ``resources/`` or downloaded). The workflow digests these files
    into an input of the import (a replaced local file reruns it)."""
    lg = check_entry(name, entry)
    fname = lg["file"]
    local = local_file if local_file is not None else lg.get("local_path")
    if local:
        found = _local_lookup(Path(local), lg, fname)
        if found is None:
            raise FileNotFoundError(
                f"model {name}: {fname} not found at {local} (logits.local_path / --file)"
            )
        return (*found, f"local {local}")
    for m in mirrors:
        found = _local_lookup(Path(m), lg, fname)
        if found is not None:
            return (*found, f"mirror {m}")
    return None


def _yandex(lg: Mapping, timeout: float) -> S.YandexDisk:
    y = lg["yandex_disk"]
    return S.YandexDisk(y["public_key"], y.get("api_base"), timeout=timeout)


def obtain(
    name: str,
    entry: Mapping,
    resources: str | os.PathLike = "resources",
    mirrors: Iterable[str | os.PathLike] = (),
    *,
    local_file: str | os.PathLike | None = None,
    timeout: float = 60.0,
    strict: bool = False,
    repin: bool = False,
) -> dict:
    """Find or download model ``name``'s verified files; nothing is fetched if a local copy is
    given or found. Returns ``{"logits": path, "targets": path | None, "files": [provenance]}``.

    ``strict`` (config ``strict_checksums``) refuses a downloadable file that has neither a
    published checksum nor a record in the lock file, before anything is fetched.

    A local copy (``local_file``, ``logits.local_path``, a mirror, an unrecorded file already
    under ``resources/``) of a downloadable file is pinned on first use only after it parses in
    the entry's format with the entry's ``num_classes`` (:func:`prove_logits`); ``repin`` pins it
    on purpose, replacing an existing record."""
    lg = check_entry(name, entry)
    fname, fmt = lg["file"], lg["format"]
    needs_targets = fmt == "coursework"
    mdir = model_dir(name, entry, resources)
    lock_file = Lock(Path(resources) / LOCK_NAME)
    pin = has_service(lg)  # downloadable files without a published checksum: pin on first use
    key = lock_key(confined(mdir, fname, f"models.{name}.logits.file", plain=True), resources)
    tkey = lock_key(mdir / TARGETS_FILE, resources)
    t_sha = lg.get("targets_sha256")
    if strict and pin:
        for k, sha, what in ((key, lg.get("sha256"), fname), (tkey, t_sha, TARGETS_FILE)):
            if what == TARGETS_FILE and fmt != "coursework":
                continue
            if not sha and lock_file.get(k) is None:
                raise PinError(
                    f"model {name}: {what} has no published checksum and strict checksums are "
                    "on; add its sha256 to the model's logits entry, or turn strict mode off to "
                    "pin it on first use"
                )

    def done(path: Path, targets: Path | None, origin: str, local: bool = True) -> dict:
        unrecorded = lock_file.get(key) is None or (
            targets is not None and not t_sha and lock_file.get(tkey) is None
        )
        if local and pin and not lg.get("sha256") and (repin or unrecorded):
            prove_logits(name, entry, path, targets)  # PinError: nothing pinned
        recs = [
            _verify(
                path,
                key,
                sha256=lg.get("sha256"),
                size=lg.get("size"),
                lock=lock_file,
                origin=origin,
                pin=pin,
                repin=repin,
            )
        ]
        if targets is not None:
            recs.append(
                _verify(
                    targets,
                    tkey,
                    sha256=t_sha,
                    size=None,
                    lock=lock_file,
                    origin=origin,
                    pin=pin,
                    repin=repin,
                )
            )
        elif needs_targets and lg.get("targets", "file") == "file":
            raise FileNotFoundError(
                f"no {TARGETS_FILE} beside {path}; the coursework format needs the folder's "
                f"{TARGETS_FILE} (or targets: class_blocks for class-folder order)"
            )
        return {"logits": path, "targets": targets, "files": recs}

    found = local_copy(name, entry, mirrors, local_file=local_file)
    if found is not None:
        return done(*found)
    dest = confined(mdir, fname, f"models.{name}.logits.file", plain=True)
    tdest = mdir / TARGETS_FILE
    if dest.is_file() and (
        not needs_targets or tdest.is_file() or lg.get("targets") == "class_blocks"
    ):
        return done(dest, tdest if tdest.is_file() else None, origin="resources")
    if not has_service(lg):
        raise FileNotFoundError(
            f"model {name}: {fname} is not in {mdir} and the entry names no source; set "
            "logits.local_path, a mirrors: directory, yandex_disk, github_lfs, huggingface or urls"
        )
    if lg.get("huggingface"):  # a file several models' jobs read: one download, the rest wait
        with _exclusive(dest):
            if dest.is_file():
                return done(dest, None, origin="resources")
            path, targets, got = _download(name, lg, dest, tdest, lock_file, key, tkey, timeout)
        return done(path, targets, origin=got["origin"], local=False)
    path, targets, got = _download(name, lg, dest, tdest, lock_file, key, tkey, timeout)
    return done(path, targets, origin=got["origin"], local=False)


@contextlib.contextmanager
def _exclusive(dest: Path):
    """An exclusive ``fcntl`` lock on the hidden ``.{name}.lock`` beside ``dest`` (parallel
    workflow jobs that need the same download; hidden, so ``stage`` leaves it out of SHA256SUMS)."""
    import fcntl

    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".{dest.name}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def prove_logits(name: str, entry: Mapping, path: Path, targets: Path | None) -> None:
    """Raise :class:`PinError` unless ``path`` (with ``targets``) parses in the entry's format
    and its logits have the entry's ``num_classes`` columns: what a local copy must show before
    its checksum is pinned on first use."""
    lg = entry["logits"]
    synth = lg["format"] == "coursework" and lg.get("targets") == "class_blocks" and targets is None
    try:
        imp = formats.read(
            lg["format"],
            path,
            targets=targets,
            synthesise_targets=synth,
            use_split=is_presplit(entry),
            options=lg,
        )
    except (ValueError, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PinError(
            f"model {name}: {path} does not parse as {lg['format']} logits ({reason}); nothing "
            "was pinned"
        ) from None
    k = entry.get("num_classes")
    if k is not None and imp.logits.shape[1] != int(k):
        raise PinError(
            f"model {name}: {path} holds logits of {imp.logits.shape[1]} classes, the entry's "
            f"num_classes is {k}; nothing was pinned. Is it the right file?"
        )


def _expected(lg: Mapping, lock_file: Lock, key: str, listed: S.Entry | None):
    """``(sha256, size)`` to check a download against: config pin, else lock, else listing."""
    rec = lock_file.get(key)
    sha = lg.get("sha256") or (rec or {}).get("sha256")
    size = lg.get("size") if lg.get("size") is not None else (rec or {}).get("size")
    if listed is not None:
        for what, mine, theirs in (("sha256", sha, listed.sha256), ("size", size, listed.size)):
            if mine is not None and theirs is not None and str(mine) != str(theirs):
                raise ValueError(
                    f"{key}: the service lists {what} {str(theirs)[:12]} but {str(mine)[:12]} is "
                    f"pinned; the published file changed: check it, then update the pin"
                )
        sha = sha or listed.sha256
        size = size if size is not None else listed.size
    return sha, size


def _download(name, lg, dest: Path, tdest: Path, lock_file, key, tkey, timeout):
    fname = lg["file"]
    cands, tcands, listed, tlisted = [], [], None, None
    if lg.get("yandex_disk"):
        disk = _yandex(lg, timeout)
        folder = lg.get("folder") or ""
        where = f"Yandex Disk folder {lg['yandex_disk']['public_key']}"
        listed, tlisted = S.find_in_tree(disk.tree(), folder, fname, where)
        cands.append(disk.candidate(listed.path))
        if tlisted is not None:
            tcands.append(disk.candidate(tlisted.path))
    if lg.get("github_lfs"):
        cands += S.lfs_candidates(lg["github_lfs"], lg["sha256"], int(lg["size"]))
    if lg.get("huggingface"):
        hf = lg["huggingface"]
        hub = S.HuggingFace(
            hf["repo"],
            hf.get("revision", "main"),
            hf.get("endpoint"),
            repo_type=hf.get("repo_type", "dataset"),
            timeout=timeout,
        )
        listed = hub.find(fname, hf.get("path"))
        cands.append(hub.candidate(listed.path))
    urls = list(lg.get("urls") or [])
    cands += S.url_candidates(urls)
    if lg["format"] == "coursework":  # targets.txt beside each mirror URL
        tcands += S.url_candidates(
            u.rsplit("/", 1)[0] + "/" + TARGETS_FILE for u in urls if "/" in u
        )
    sha, size = _expected(lg, lock_file, key, listed)
    got = S.fetch_verified(dest, cands, sha256=sha, size=size, timeout=timeout)
    targets = None
    if lg["format"] == "coursework":
        if tdest.is_file():  # kept from an earlier download; verified with the logits file
            targets = tdest
        elif tcands:
            tsha, tsize = _expected({"sha256": lg.get("targets_sha256")}, lock_file, tkey, tlisted)
            try:
                S.fetch_verified(tdest, tcands, sha256=tsha, size=tsize, timeout=timeout)
                targets = tdest
            except S.DownloadError:
                if lg.get("targets", "file") == "file":
                    dest.unlink(missing_ok=True)
                    raise
        elif lg.get("targets", "file") == "file":
            dest.unlink(missing_ok=True)
            raise FileNotFoundError(
                f"model {name}: the source has no {TARGETS_FILE} beside {fname}; set targets: "
                "class_blocks if its rows are in class-folder order"
            )
    return dest, targets, got


# --------------------------------------------------------------------------- import
