"""Checksum-verified downloads with local mirror directories (for offline and air-gapped use).

:func:`fetch` places one file at ``dest``. It first looks for a file of the same name in each
mirror directory (in order) and copies the first whose checksum matches; otherwise it downloads
``url``. Whatever it places is verified against the pinned checksum before it is moved into place,
so a corrupt or mismatched file never appears at ``dest``. A file already at ``dest`` with the right
checksum is kept (no work), one with the wrong checksum is refused with a clear error.

Every network call of calbench goes through :func:`with_retries`: a timeout per attempt, at most
:data:`ATTEMPTS` attempts with exponential backoff for transient failures (timeouts, refused or
reset connections, HTTP 408/425/429/5xx), and a one-line :class:`NetworkError` naming the host
and the file when they are spent. Client errors (HTTP 4xx) are not retried.
"""

from __future__ import annotations

import http.client
import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path

from calbench.io import atomic_path, file_digest

_CHUNK = 1 << 20
#: Attempts per URL (the first and two retries) and the first backoff in seconds (doubled).
ATTEMPTS = 3
BACKOFF = 1.0


class ChecksumError(ValueError):
    """A file's content does not match its pinned checksum."""


class NetworkError(OSError):
    """A network call failed for good (after its retries); the message names host and file."""


def _host_and_file(url: str) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(url)
    name = urllib.parse.unquote(parts.path.rstrip("/").rsplit("/", 1)[-1]) or "/"
    return parts.netloc or url, name


_NETWORK = (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException)


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code in (408, 425, 429) or exc.code >= 500
    return isinstance(exc, _NETWORK)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__


def with_retries(
    action: Callable[[], object],
    url: str,
    *,
    attempts: int | None = None,
    backoff: float | None = None,
    what: str | None = None,
):
    """``action()`` (one network call on ``url`` that sets its own timeout), retried with
    exponential backoff (``backoff``, ``2 backoff``, ...) on transient failures, at most
    ``attempts`` times; then a one-line :class:`NetworkError` naming the host and ``what`` (default
    the URL's file name). Other errors (a full disk, a size check of the caller) pass through."""
    attempts = ATTEMPTS if attempts is None else attempts
    backoff = BACKOFF if backoff is None else backoff
    host, name = _host_and_file(url)
    for i in range(attempts):
        try:
            return action()
        except _NETWORK as exc:
            last = i == attempts - 1 or not _transient(exc)
            if last:
                tries = f"{i + 1} attempt{'s' if i else ''}"
                raise NetworkError(
                    f"{host}: could not get {what or name} ({_reason(exc)}; {tries}); check the "
                    "address and your network, or place the file in a mirror directory"
                ) from None
            time.sleep(backoff * 2**i)
    raise AssertionError("unreachable")  # pragma: no cover


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


def _download(url: str, dest: Path, timeout: float, name: str | None = None) -> None:
    """Download ``url`` to ``dest`` (``timeout`` seconds per attempt, retried)."""
    with_retries(lambda: _download_once(url, dest, timeout), url, what=name)


def _download_once(url: str, dest: Path, timeout: float) -> None:
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
    unpinned: bool = False,
) -> Path:
    """Place a verified copy of a file at ``dest`` and return ``dest``.

    ``mirrors`` are directories searched for ``filename`` (default: ``dest``'s name) before any of
    ``urls`` is tried, in order. A file without any checksum is refused unless ``unpinned=True``
    (the pin-on-first-use callers, which check the file themselves, :func:`fetch_origin`).
    """
    return fetch_origin(
        dest, urls=urls, mirrors=mirrors, sha256=sha256, md5=md5, filename=filename,
        timeout=timeout, unpinned=unpinned,
    )[0]


def fetch_origin(
    dest: str | os.PathLike,
    *,
    urls: Iterable[str] = (),
    mirrors: Iterable[str | os.PathLike] = (),
    sha256: str | None = None,
    md5: str | None = None,
    filename: str | None = None,
    timeout: float = 60.0,
    unpinned: bool = False,
) -> tuple[Path, str]:
    """:func:`fetch`, also returning where the file came from: ``"existing"`` (already at
    ``dest``), ``"mirror <dir>"`` or the URL it was downloaded from."""
    dest = Path(dest)
    name = filename or dest.name
    if not (sha256 or md5 or unpinned):
        raise ChecksumError(
            f"{name} has no checksum to verify it against; pin its sha256 (or md5) in the config"
        )
    if dest.is_dir():
        raise IsADirectoryError(f"{dest} is a directory, not a file; remove it or pass a file path")
    if dest.exists():
        verify(dest, sha256=sha256, md5=md5)
        return dest, "existing"
    mirrors = list(mirrors)
    urls = list(urls)
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
        return dest, f"mirror {mirror}"
    for url in urls:
        try:
            with atomic_path(dest) as tmp:
                _download(url, tmp, timeout, name)
                verify(tmp, sha256=sha256, md5=md5)
            return dest, url
        except ChecksumError as exc:
            errors.append(f"{url}: {exc}")
        except OSError as exc:  # NetworkError after retries, disk errors
            errors.append(str(exc))
    where = [str(m) for m in mirrors] + urls
    detail = "; ".join(errors) if errors else "no mirror holds it"
    raise FileNotFoundError(
        f"could not obtain {name} (tried {', '.join(where) or 'nothing'}: {detail}); "
        f"download it by hand into a mirror directory or to {dest}"
    )
