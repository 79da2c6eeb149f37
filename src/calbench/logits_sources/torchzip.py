"""Reading a ``torch.save``'d tensor (the coursework's published logits) without importing torch.

:func:`read_pt_zip` reads torch's zip container (torch >= 1.6) with a restricted unpickler that
rebuilds a tensor from its storage and nothing else and checks the storage's CRC; it runs no code
from the file. :func:`read_torch_tensor` falls back to ``torch.load(weights_only=True)`` for what
it does not handle (:func:`calbench.logits_sources.formats.read_torch_tensor`).
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from dataclasses import dataclass

import numpy as np

from calbench import io as cio


class Unsupported(Exception):
    """Not a plain tensor in torch's zip container: leave it to torch.load(weights_only=True)."""


#: storage classes of a torch zip container -> little-endian numpy dtype
_STORAGES = {"FloatStorage": "<f4", "DoubleStorage": "<f8", "HalfStorage": "<f2"}


@dataclass
class _Storage:
    key: str
    dtype: str
    numel: int


@dataclass
class _TensorRef:
    storage: _Storage
    offset: int
    size: tuple
    stride: tuple


def _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks, metadata=None):
    if not isinstance(storage, _Storage) or hooks:
        raise Unsupported("not a plain tensor")
    return _TensorRef(storage, int(offset), tuple(size), tuple(stride))


class _PtUnpickler(pickle.Unpickler):
    """``data.pkl`` of a torch zip container holding one tensor: the only globals resolved are
    torch's tensor-rebuild function, storage class names and ``OrderedDict`` (empty hooks)."""

    def find_class(self, module, name):
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor_v2
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "torch" and name in _STORAGES:
            return name
        raise Unsupported(f"global {module}.{name}")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise Unsupported("storage record")
        _, kind, key, _location, numel = pid
        if kind not in _STORAGES:
            raise Unsupported(f"storage {kind}")
        return _Storage(str(key), _STORAGES[kind], int(numel))


def read_pt_zip(path) -> np.ndarray:
    """The tensor in a torch zip container (``<name>/data.pkl`` + ``<name>/data/<key>``) as numpy,
    without torch: :class:`_PtUnpickler` resolves nothing but the tensor record, the storage's raw
    little-endian bytes are read (CRC-checked) and viewed with the record's shape and strides.
    Raises :class:`Unsupported` for anything else (other containers, dtypes, several tensors)."""
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise Unsupported("not a zip") from None
    with zf:
        pkls = [n for n in zf.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pkls) != 1:
            raise Unsupported("no single data.pkl")
        prefix = pkls[0][: -len("data.pkl")]
        if prefix + "byteorder" in zf.namelist():
            if zf.read(prefix + "byteorder").strip() != b"little":
                raise Unsupported("big-endian")
        if zf.getinfo(pkls[0]).file_size > _MAX_PICKLE_BYTES:  # a tensor record is ~300 bytes
            raise Unsupported("data.pkl too large for one tensor record")
        try:
            ref = _PtUnpickler(io.BytesIO(zf.read(pkls[0]))).load()
        except Unsupported:
            raise
        except Exception as exc:  # a damaged data.pkl
            raise Unsupported(str(exc)) from None
        if not isinstance(ref, _TensorRef) or len(ref.size) != 2:
            raise Unsupported("not a 2-D tensor")
        member = prefix + "data/" + ref.storage.key
        _check_storage_size(path, zf, member, ref.storage)
        try:
            raw = zf.read(member)
        except (KeyError, zipfile.BadZipFile) as exc:
            raise ValueError(
                f"{path}: damaged torch container ({exc}); download it again"
            ) from None
    flat = np.frombuffer(raw, dtype=ref.storage.dtype)
    (n, k), (s0, s1), off = ref.size, ref.stride, ref.offset
    if flat.size != ref.storage.numel or min(n, k, s0, s1, off) < 0:
        raise Unsupported("inconsistent storage")
    if off + (n - 1) * s0 + (k - 1) * s1 >= flat.size:
        raise ValueError(f"{path}: tensor record points past its storage; download it again")
    if (s0, s1) == (k, 1):
        return flat[off : off + n * k].reshape(n, k)
    view = np.lib.stride_tricks.as_strided(
        flat[off:], shape=(n, k), strides=(s0 * flat.itemsize, s1 * flat.itemsize), writeable=False
    )
    return np.ascontiguousarray(view)


#: Largest ``data.pkl`` of a single-tensor container read here.
_MAX_PICKLE_BYTES = 1 << 20


def _check_storage_size(path, zf, member: str, storage: _Storage) -> None:
    """Refuse, before reading it, a storage whose declared size disagrees with its record
    (``numel`` elements) or exceeds :data:`calbench.io.MAX_NPZ_BYTES` or, above
    :data:`calbench.io.NPZ_SMALL_BYTES`, :data:`calbench.io.MAX_NPZ_RATIO` times the file (a zip
    bomb): the size bounds of every ``.npz`` read (:func:`calbench.io.check_npz_sizes`)."""
    import os

    try:
        declared = zf.getinfo(member).file_size
    except KeyError:
        raise ValueError(f"{path}: damaged torch container (no {member}); download it again") from None
    want = storage.numel * np.dtype(storage.dtype).itemsize
    size = os.path.getsize(path)
    if declared > cio.MAX_NPZ_BYTES or (
        declared > cio.NPZ_SMALL_BYTES and declared > cio.MAX_NPZ_RATIO * size
    ):
        raise ValueError(
            f"{path}: the tensor's storage declares {declared} bytes in a file of {size}: a zip "
            "bomb or a damaged file; download it again"
        )
    if declared != want:
        raise ValueError(
            f"{path}: the tensor record claims {storage.numel} elements ({want} bytes) but its "
            f"storage holds {declared} bytes: damaged or crafted; download it again"
        )


def is_zip(path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == b"PK\x03\x04"
