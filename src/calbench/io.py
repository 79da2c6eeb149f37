"""Atomic file output and hashing, so an interrupted step never leaves a partial file behind."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; move it onto ``path`` only if the block succeeds.

    The temporary name keeps ``path``'s suffix (numpy and matplotlib choose formats by it).
    On any exception, including KeyboardInterrupt, the temporary file is removed.
    """
    path = Path(path)
    if path.is_dir():  # named as the user gave it, not as the hidden temporary file
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a file", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}"
    )
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp creates 0600; give the result the mode an ordinary open() would (0666 & ~umask)
        os.chmod(tmp_path, 0o666 & ~_umask())
        try:
            os.replace(tmp_path, path)
        except OSError as exc:  # name the destination, not the temporary file
            raise type(exc)(exc.errno, exc.strerror, str(path)) from None
    finally:
        tmp_path.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def read_npz(path: str | os.PathLike, what: str, fix: str) -> dict:
    """All arrays of an ``.npz`` file (no pickles), or a one-line ``ValueError`` naming ``what``
    (e.g. "logits file") and ``fix`` for a file that is not a readable zip archive (truncated,
    garbage, an arrays entry cut short)."""
    import zipfile

    import numpy as np

    path = Path(path)
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic != b"PK\x03\x04" and magic != b"PK\x05\x06":
        raise ValueError(f"cannot read {what} {path}: not an .npz (zip) archive; {fix}")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(
            f"cannot read {what} {path}: damaged or truncated ({reason}); {fix}"
        ) from None


def torch_load_reason(exc: BaseException) -> str:
    """The informative part of a ``torch.load`` error on one line, never cut: for a file refused
    by ``weights_only=True`` the line naming the refused global (torch's advice to disable the
    check is dropped); otherwise every line of the message, joined."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if lines and lines[0].startswith("Weights only load failed"):
        kept = [ln for ln in lines[1:] if not ln.startswith("Check the documentation")]
        return "refused by weights_only=True (unsafe pickle): " + " ".join(kept)
    return " ".join(lines) or type(exc).__name__


def file_digest(path: str | os.PathLike, algorithm: str = "sha256", chunk: int = 1 << 20) -> str:
    """Hex digest of a file's content (``algorithm`` is any hashlib name: sha256, md5, ...)."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def array_digest(*arrays) -> str:
    """SHA-256 of arrays' dtype, shape and bytes (C order): a content hash for sample orders."""
    import numpy as np

    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()
