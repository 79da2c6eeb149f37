"""Atomic file output, so an interrupted step never leaves a partial file behind, and hashing: the
one module of calbench that calls :mod:`hashlib` (:func:`file_digest`, :func:`array_digest`,
:func:`bytes_digest`, :func:`hasher`); every digest elsewhere (code inputs, specs, splits, kept
calibrators, plug-ins, downloads, checkpoints) goes through these (tests/test_io.py)."""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import math
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


#: Largest total size the arrays of one ``.npz`` may declare (ImageNet-21k logits of 50,000
#: samples, 21,841 classes in float32 are 4.4 GB).
MAX_NPZ_BYTES = 16 << 30
#: How much larger than the file its arrays may declare to be, for files above
#: :data:`NPZ_SMALL_BYTES`: ``np.savez`` stores arrays uncompressed (ratio 1), and compressed
#: logits shrink by less than 2x; a zip bomb's members inflate by up to ~1,000x.
MAX_NPZ_RATIO = 100
#: Declared sizes up to this many bytes are accepted whatever the file's size (a compressed
#: file of small labels or a constant column may shrink by more than :data:`MAX_NPZ_RATIO`).
NPZ_SMALL_BYTES = 64 << 20


def _human(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


def check_npz_sizes(path, what: str, fix: str, max_bytes: int = MAX_NPZ_BYTES) -> None:
    """Refuse, before any array is allocated, an ``.npz`` whose arrays would not fit what the
    file can hold: each member's ``.npy`` header (shape and dtype) must describe exactly the
    bytes the member declares, no member may hold objects, and the declared total must stay
    below ``max_bytes`` and (above :data:`NPZ_SMALL_BYTES`) below :data:`MAX_NPZ_RATIO` times
    the file's size (a zip bomb). One-line ``ValueError`` naming ``what``, the member and
    ``fix``."""
    import zipfile

    import numpy as np

    size = os.path.getsize(path)
    try:
        with zipfile.ZipFile(path) as zf:
            members = zf.infolist()
            total = sum(m.file_size for m in members)
            if total > max_bytes or (total > NPZ_SMALL_BYTES and total > MAX_NPZ_RATIO * size):
                raise ValueError(
                    f"{what} {path} declares {_human(total)} of arrays in a file of "
                    f"{_human(size)} (at most {_human(max_bytes)}, and at most "
                    f"{MAX_NPZ_RATIO}x the file above {_human(NPZ_SMALL_BYTES)}): a zip bomb or "
                    f"a damaged file; {fix}"
                )
            for m in members:
                if not m.filename.endswith(".npy"):
                    continue
                with zf.open(m) as fh:
                    version = np.lib.format.read_magic(fh)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
                    else:
                        shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
                    header = fh.tell()
                if dtype.hasobject:
                    raise ValueError(
                        f"{what} {path}: array {m.filename[:-4]!r} holds Python objects, which "
                        f"are never loaded (pickles run code); {fix}"
                    )
                claimed = header + math.prod(shape) * dtype.itemsize
                if claimed != m.file_size:
                    raise ValueError(
                        f"{what} {path}: array {m.filename[:-4]!r} claims shape {shape} of "
                        f"{dtype} ({_human(claimed)}) but holds {_human(m.file_size)}: damaged "
                        f"or crafted; {fix}"
                    )
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(
            f"cannot read {what} {path}: damaged or truncated ({reason}); {fix}"
        ) from None
    except ValueError as exc:
        if str(exc).startswith((f"{what} {path}", f"cannot read {what}")):
            raise
        reason = str(exc).splitlines()[0]
        raise ValueError(
            f"cannot read {what} {path}: damaged array header ({reason[:160]}); {fix}"
        ) from None


def read_npz(path: str | os.PathLike, what: str, fix: str, max_bytes: int = MAX_NPZ_BYTES) -> dict:
    """All arrays of an ``.npz`` file (no pickles), or a one-line ``ValueError`` naming ``what``
    (e.g. "logits file") and ``fix`` for a file that is not a readable zip archive (truncated,
    garbage, an arrays entry cut short) or whose arrays would not fit what it can hold
    (:func:`check_npz_sizes`, checked before anything is allocated). The one reader of every
    ``.npz`` calbench reads back."""
    import zipfile

    import numpy as np

    path = Path(path)
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic != b"PK\x03\x04" and magic != b"PK\x05\x06":
        raise ValueError(f"cannot read {what} {path}: not an .npz (zip) archive; {fix}")
    check_npz_sizes(path, what, fix, max_bytes)
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


def bytes_digest(data: bytes | str, algorithm: str = "sha256") -> str:
    """Hex digest of ``data`` (a ``str``: of its UTF-8 bytes)."""
    h = hashlib.new(algorithm)
    h.update(data.encode() if isinstance(data, str) else data)
    return h.hexdigest()


def hasher(algorithm: str = "sha256"):
    """A fresh hashlib object (``update`` / ``hexdigest``), for a digest fed in pieces: a stream
    being downloaded, many files in turn."""
    return hashlib.new(algorithm)


def array_digest(*arrays) -> str:
    """SHA-256 of arrays' dtype, shape and bytes (C order): a content hash for sample orders."""
    import numpy as np

    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def png_data_uri(path: str | os.PathLike) -> str:
    """``data:image/png;base64,...`` for a PNG file (refuses anything that is not a PNG)."""
    data = Path(path).read_bytes()
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError(f"{path} is not a PNG file; regenerate it with calbench plot-reliability")
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")
