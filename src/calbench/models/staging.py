"""Placing a published model's files for offline use: the verified weights file (possibly a
member of a shared archive) and the pinned torch.hub code; nothing here imports torch except
:func:`calbench.models.entries.hub_dir_candidates`.

Files are fetched from a user-supplied copy and mirror directories before the registry's URLs,
and verified as :mod:`calbench.models.pins` describes (``strict=True`` refuses files without a
published checksum).
"""

from __future__ import annotations

import os
import shutil
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from calbench.data.download import verify
from calbench.lockfile import PinError, lock_key
from calbench.models.entries import (
    archive_path,
    checkpoint_path,
    extract_member,
    hub_dir_candidates,
)
from calbench.models.pins import fetch_pinned, refuse_unpinned, resources_lock, verify_file
from calbench.models.pretrained import prove_checkpoint


def download_checkpoint(
    name: str,
    entry: Mapping,
    resources: str | os.PathLike = "resources",
    mirrors: Iterable[str | os.PathLike] = (),
    local_file: str | os.PathLike | None = None,
    timeout: float = 60.0,
    out: str | os.PathLike | None = None,
    strict: bool = False,
    repin: bool = False,
) -> Path:
    """Place the verified weights file of model ``name`` under ``resources`` and return its path.

    ``local_file`` (a user-supplied copy of the file or archive; default the entry's
    ``checkpoint.local_path``) and ``mirrors`` (directories holding files under their registry
    ``filename``) are tried before the registry's ``urls``. Files without a published checksum
    are pinned on first use in ``<resources>/checksums.lock`` and verified against it on every
    later fetch; ``strict=True`` refuses them. ``out`` overrides the destination
    (:func:`checkpoint_path`); shared archives stay under ``resources/archives``.

    A pin on first use comes only from the registry's URLs, or from a local file (``local_file``,
    a mirror, a file already in place) proven to be the weights
    (:func:`calbench.models.pretrained.prove_checkpoint`: a strict ``weights_only`` load into the
    configured architecture; an entry with ``expected_acc`` cannot be proven at download time and
    needs ``repin``). ``repin=True`` pins such a file on purpose, replacing an existing record
    (stated on stderr); it still has to load into the architecture.
    """
    if entry.get("source") == "timm" and not entry.get("checkpoint"):
        raise ValueError(
            f"model {name}: no checkpoint file in the registry (timm would download it itself)"
        )
    ckpt = entry["checkpoint"]
    mirrors = list(mirrors)
    if local_file is None and ckpt.get("local_path"):
        local_file = ckpt["local_path"]
    if local_file is not None:
        local_file = Path(local_file).expanduser()
        if local_file.is_dir():
            raise ValueError(
                f"--file {local_file} is a directory; pass the downloaded {ckpt['filename']} itself"
            )
        if not local_file.is_file():
            raise FileNotFoundError(
                f"--file {local_file} does not exist; pass the downloaded {ckpt['filename']}"
            )
    filename = ckpt["filename"]
    dest = Path(out) if out is not None else checkpoint_path(name, entry, resources)
    target = archive_path(entry, resources, name) if ckpt.get("archive_member") else dest
    pin = ckpt.get("sha256")
    if strict and not pin:
        raise refuse_unpinned(
            f"model {name}: {ckpt['filename']}", "add checkpoint.sha256 to its config entry"
        )
    lock = resources_lock(resources)

    def prove(path: Path) -> None:
        prove_checkpoint(name, entry, path, resources=resources, on_purpose=repin)

    fetched, _ = fetch_pinned(
        target,
        lock_key(target, resources),
        lock,
        pin,
        prove=prove,
        local_file=local_file,
        repin=repin,
        urls=ckpt.get("urls") or (),
        mirrors=mirrors,
        filename=filename,
        name_key=f"models.{name}.checkpoint.filename",
        timeout=timeout,
    )
    if ckpt.get("archive_member"):
        # a member of a published-pinned archive is vouched for by the archive's pin
        member_pin = ckpt.get("member_sha256") or pin
        if repin and not member_pin:
            dest.unlink(missing_ok=True)  # re-extracted from the re-pinned archive
        if dest.exists():
            verify_file(dest, ckpt.get("member_sha256"), resources=resources)
        else:
            extract_member(fetched, ckpt["archive_member"], dest)
            if ckpt.get("member_sha256"):
                verify(dest, sha256=ckpt["member_sha256"])
        source = f"{ckpt['filename']}:{ckpt['archive_member']}"
        if repin and not member_pin:
            lock.record(lock_key(dest, resources), dest, source, replace=True)
        else:
            lock.check(lock_key(dest, resources), dest, published=member_pin, source=source)
    return dest


def prove_hub_archive(path: Path, hub: Mapping) -> None:
    """Raise :class:`PinError` unless the local zip ``path`` is GitHub's archive of
    ``hub.repo@hub.ref``: GitHub writes the commit id as the archive's comment, and the code
    holds ``hubconf.py`` under its one top folder."""
    try:
        with zipfile.ZipFile(path) as zf:
            comment = zf.comment.decode("ascii", "replace").strip()
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise PinError(f"{path} is not a zip archive ({exc}); nothing was pinned") from None
    if comment != hub["ref"] or not any(n.count("/") == 1 and n.endswith("/hubconf.py") for n in names):
        raise PinError(
            f"{path} is not GitHub's archive of {hub['repo']}@{hub['ref']} (its comment names "
            f"commit {comment[:12] or 'none'}); nothing was pinned. Fetch it from GitHub, or add "
            "hub.archive_sha256 to the config"
        )


def stage_model(
    name: str,
    entry: Mapping,
    resources: str | os.PathLike = "resources",
    mirrors: Iterable[str | os.PathLike] = (),
    *,
    local_file: str | os.PathLike | None = None,
    timeout: float = 60.0,
    out: str | os.PathLike | None = None,
    strict: bool = False,
    repin: bool = False,
) -> Path:
    """Everything model ``name`` needs offline: the verified weights (:func:`download_checkpoint`)
    and, for ``source: torchhub``, the pinned hub code (:func:`stage_hub_code`). The one code path
    of ``calbench download-checkpoint`` (the workflow rule) and ``calbench stage``."""
    if not entry.get("checkpoint"):
        raise ValueError(
            f"model {name} has no checkpoint entry (source {entry.get('source')}); add "
            "checkpoint: {filename, urls, sha256} so the weights can be verified"
        )
    path = download_checkpoint(
        name,
        entry,
        resources,
        mirrors,
        local_file=local_file,
        timeout=timeout,
        out=out,
        strict=strict,
        repin=repin,
    )
    if entry.get("source") == "torchhub":
        stage_hub_code(entry, resources, mirrors, timeout=timeout, strict=strict)
    return path


def stage_hub_code(
    entry: Mapping,
    resources: str | os.PathLike = "resources",
    mirrors: Iterable[str | os.PathLike] = (),
    timeout: float = 60.0,
    strict: bool = False,
) -> Path:
    """Fetch the pinned torch.hub code (GitHub archive of ``hub.ref``) and unpack it for offline use.

    The archive is verified against ``hub.archive_sha256`` or pinned on first use (see
    :func:`download_checkpoint`); the commit ``hub.ref`` itself pins the code's content."""
    hub = entry["hub"]
    dest = hub_dir_candidates(entry, resources)[0]
    if (dest / "hubconf.py").is_file():
        return dest
    archive = dest.with_name(dest.name + ".zip")
    if strict and not hub.get("archive_sha256"):
        raise refuse_unpinned(f"torch.hub code {archive.name}", "add hub.archive_sha256")
    fetch_pinned(
        archive,
        lock_key(archive, resources),
        resources_lock(resources),
        hub.get("archive_sha256"),
        prove=lambda path: prove_hub_archive(path, hub),
        urls=[f"https://github.com/{hub['repo']}/archive/{hub['ref']}.zip"],
        mirrors=mirrors,
        timeout=timeout,
    )
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            parts = Path(info.filename).parts[1:]  # drop the "<repo>-<ref>/" top folder
            if not parts or info.is_dir():
                continue
            if ".." in parts:
                raise ValueError(f"{archive} has an unsafe member {info.filename!r}")
            out = tmp.joinpath(*parts)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(zf.read(info))
    if not (tmp / "hubconf.py").is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        raise ValueError(
            f"{archive} holds no hubconf.py; is {hub['repo']}@{hub['ref']} a torch.hub repository?"
        )
    tmp.rename(dest)
    return dest
