"""Checksum-verified downloads with local mirror directories (for offline and air-gapped use).

:func:`fetch` places one file at ``dest``. It first looks for a file of the same name in each
mirror directory (in order) and copies the first whose checksum matches; otherwise it downloads
``url``. Whatever it places is verified against the pinned checksum before it is moved into place,
so a corrupt or mismatched file never appears at ``dest``. A file already at ``dest`` with the right
checksum is kept (no work), one with the wrong checksum is refused with a clear error.
"""

from __future__ import annotations

import os
import shutil
import urllib.request
from collections.abc import Iterable
from pathlib import Path

from calbench.io import atomic_path, file_digest

_CHUNK = 1 << 20


class ChecksumError(ValueError):
    """A file's content does not match its pinned checksum."""


def verify(path: str | os.PathLike, *, sha256: str | None = None, md5: str | None = None) -> None:
    """Raise :class:`ChecksumError` unless ``path`` matches every given checksum.

    ``sha256`` may be a prefix (at least 8 hex digits), as in torch.hub's file names.
    """
    for algo, expected in (("sha256", sha256), ("md5", md5)):
        if not expected:
            continue
        expected = expected.lower()
        if algo == "sha256" and len(expected) < 8:
            raise ValueError(f"sha256 prefix {expected!r} is too short; pin at least 8 hex digits")
        actual = file_digest(path, algo)
        if not actual.startswith(expected):
            raise ChecksumError(
                f"{path}: {algo} {actual[: max(len(expected), 12)]} does not match the pinned "
                f"{expected}; the file is corrupt or a different version: delete it and download again"
            )


def _download(url: str, dest: Path, timeout: float) -> None:
    req = urllib.request.Request(url, headers={"User-Agent": "calbench"})
    with urllib.request.urlopen(req, timeout=timeout) as resp, open(dest, "wb") as out:
        total = int(resp.headers.get("Content-Length") or 0) or None
        try:
            from tqdm import tqdm

            bar = tqdm(total=total, unit="B", unit_scale=True, desc=dest.name, disable=None)
        except ImportError:  # pragma: no cover
            bar = None
        while block := resp.read(_CHUNK):
            out.write(block)
            if bar is not None:
                bar.update(len(block))
        if bar is not None:
            bar.close()


def fetch(
    dest: str | os.PathLike,
    *,
    urls: Iterable[str] = (),
    mirrors: Iterable[str | os.PathLike] = (),
    sha256: str | None = None,
    md5: str | None = None,
    filename: str | None = None,
    timeout: float = 60.0,
) -> Path:
    """Place a verified copy of a file at ``dest`` and return ``dest``.

    ``mirrors`` are directories searched for ``filename`` (default: ``dest``'s name) before any of
    ``urls`` is tried, in order. Without a checksum a file is accepted as is (callers that pin
    one should always pass it).
    """
    dest = Path(dest)
    name = filename or dest.name
    if dest.exists():
        verify(dest, sha256=sha256, md5=md5)
        return dest
    errors: list[str] = []
    for mirror in mirrors:
        candidate = Path(mirror).expanduser() / name
        if not candidate.is_file():
            continue
        try:
            verify(candidate, sha256=sha256, md5=md5)
        except ChecksumError as exc:
            errors.append(str(exc))
            continue
        with atomic_path(dest) as tmp:
            shutil.copyfile(candidate, tmp)
            verify(tmp, sha256=sha256, md5=md5)
        return dest
    for url in urls:
        try:
            with atomic_path(dest) as tmp:
                _download(url, tmp, timeout)
                verify(tmp, sha256=sha256, md5=md5)
            return dest
        except ChecksumError as exc:
            errors.append(f"{url}: {exc}")
        except OSError as exc:  # URLError, HTTPError, timeouts, DNS failures
            errors.append(f"{url}: {exc}")
    where = [str(m) for m in mirrors] + list(urls)
    detail = "; ".join(errors) if errors else "no mirror holds it"
    raise FileNotFoundError(
        f"could not obtain {name} (tried {', '.join(where) or 'nothing'}: {detail}); "
        f"download it by hand into a mirror directory or to {dest}"
    )
