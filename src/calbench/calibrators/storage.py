"""The fitted-calibrator file: one JSON object, arrays stored compactly, sealed by a digest.

A calibrator file holds :meth:`Calibrator.to_dict` and a ``sha256``::

    {"method": "ts", "params": {...}, "state": {"n_classes": 10, "a": ARRAY},
     "fitted_on": {...}, "sha256": "<64 hex digits>"}

``ARRAY = {"__ndarray__": DATA, "dtype": "float32", "shape": [K, K]}``, where ``DATA`` is

* a nested list of numbers for arrays of at most :data:`SMALL_ARRAY` entries (a temperature or a
  Platt map stays readable; Python's float repr is exact for float64 and hence float32), or
* a string: base64 of the array's raw little-endian bytes in C order, for larger arrays: 4/3 byte
  of file per byte of parameter, bit-exact, and decoded without parsing a number (a 5,000-sample
  one-vs-rest Venn-Abers fit on 100 classes was 37 MB of number lists, it is 16 MB).

``dtype`` is one of :data:`DTYPES` (real numbers only: a complex, boolean or object array is
refused). ``sha256`` is the SHA-256 of the canonical JSON (sorted keys, no whitespace) of every
other key; :func:`read_sealed` verifies it before anything is decoded, so a file truncated,
edited by hand or written by an older calbench is a one-line error naming the fix (refit). The
digest guards against accidents, not attacks: the state is validated against what it claims
anyway (:meth:`Calibrator.from_dict`). Sizes are checked before memory is allocated: the file
against :data:`MAX_JSON_BYTES`, each array's declared shape against its data.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from calbench._checks import json_depth_exceeds
from calbench.io import atomic_write_text, bytes_digest

#: Arrays of at most this many entries are written as number lists, larger ones as base64.
SMALL_ARRAY = 16
#: The dtypes an array of a calibrator file may declare.
DTYPES = frozenset(
    ["float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
)
#: Largest calibrator file read or written (bytes): ms_b at K = 5,000 (float32) is 133 MB.
MAX_JSON_BYTES = 512 << 20
#: Deepest nesting of a calibrator JSON (written files nest at most 5 levels).
MAX_JSON_DEPTH = 32
DIGEST_KEY = "sha256"


def to_jsonable(value: Any) -> Any:
    """Convert numpy arrays/scalars (recursively) into the file's JSON values (module docstring).

    Arrays become ``{"__ndarray__": list or base64, "dtype": ..., "shape": [...]}`` so dtype and
    shape survive the round trip bit for bit; numpy scalars become Python numbers.
    """
    if isinstance(value, np.ndarray):
        dtype = value.dtype
        if dtype.name not in DTYPES:
            raise ValueError(
                f"cannot store an array of dtype {dtype} in a calibrator file; use one of "
                f"{sorted(DTYPES)}"
            )
        data: Any
        if value.size <= SMALL_ARRAY:
            data = value.tolist()
        else:
            raw = np.ascontiguousarray(value, dtype=dtype.newbyteorder("<")).tobytes()
            data = base64.b64encode(raw).decode("ascii")
        return {"__ndarray__": data, "dtype": dtype.name, "shape": list(value.shape)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


def from_jsonable(value: Any) -> Any:
    """Inverse of :func:`to_jsonable`; a malformed array is a one-line ``ValueError``."""
    if isinstance(value, dict):
        if "__ndarray__" in value:
            return decode_array(value)
        return {k: from_jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_jsonable(v) for v in value]
    return value


def _declared(value: dict) -> tuple[np.dtype, tuple[int, ...], int]:
    """``(dtype, shape, nbytes)`` an array entry declares, checked before any allocation."""
    name = value.get("dtype")
    if not isinstance(name, str) or name not in DTYPES:
        raise ValueError(f"dtype {name!r:.40} is not one of {sorted(DTYPES)}")
    shape = value.get("shape")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise ValueError(f"shape {shape!r:.60} is not a list of integers >= 0")
    dtype = np.dtype(name)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > MAX_JSON_BYTES:
        raise ValueError(f"shape {shape} claims {nbytes} bytes, more than a calibrator file holds")
    return dtype, tuple(shape), nbytes


def decode_array(value: dict) -> np.ndarray:
    """The array of one ``{"__ndarray__": ..., "dtype": ..., "shape": ...}`` entry.

    Its dtype must be one of :data:`DTYPES`, its data must hold exactly the declared shape's
    entries, and listed values must be representable in the dtype (300 is no ``int8``)."""
    dtype, shape, nbytes = _declared(value)
    data = value["__ndarray__"]
    if isinstance(data, str):
        if len(data) != 4 * math.ceil(nbytes / 3):
            raise ValueError(
                f"holds {len(data)} base64 characters, but shape {list(shape)} of {dtype} needs "
                f"{4 * math.ceil(nbytes / 3)}"
            )
        try:
            raw = base64.b64decode(data, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"is not valid base64 ({exc})") from None
        return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(shape)
    if not isinstance(data, list | int | float) or isinstance(data, bool):
        raise ValueError(f"data must be a list of numbers or a base64 string, got {data!r:.40}")
    try:
        arr = np.array(data)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"is not a rectangular list of numbers ({exc})") from None
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"must hold numbers only, got {arr.dtype} values")
    if arr.size != math.prod(shape):
        raise ValueError(
            f"holds {arr.size} values, but shape {list(shape)} needs {math.prod(shape)}"
        )
    if arr.size:
        lo, hi = arr.min(), arr.max()
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            if arr.dtype.kind == "f" and not np.all(arr == np.round(arr)):
                raise ValueError(f"holds non-integer values for dtype {dtype}")
            if lo < info.min or hi > info.max:
                bad = lo if lo < info.min else hi
                raise ValueError(
                    f"value {bad} is out of range for dtype {dtype} [{info.min}, {info.max}]"
                )
        elif np.isfinite(lo) and np.isfinite(hi):
            big = max(abs(float(lo)), abs(float(hi)))
            if big > float(np.finfo(dtype).max):
                raise ValueError(f"value {big:g} is out of range for dtype {dtype}")
    return arr.astype(dtype).reshape(shape)


def canonical_digest(doc: dict) -> str:
    """SHA-256 of ``doc``'s canonical JSON (sorted keys, no whitespace), ``sha256`` left out."""
    body = {k: v for k, v in doc.items() if k != DIGEST_KEY}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return bytes_digest(text)


def sealed_text(doc: dict, *, allow_nan: bool = False) -> str:
    """The file text of ``doc`` (a :meth:`Calibrator.to_dict` output) with its digest added;
    ``allow_nan=True`` writes NaN and infinities (which a reader refuses: for tests)."""
    return json.dumps({**doc, DIGEST_KEY: canonical_digest(doc)}, indent=1, allow_nan=allow_nan)


def write_sealed(path: str | os.PathLike, doc: dict, max_bytes: int = MAX_JSON_BYTES) -> None:
    """Write ``doc`` sealed (:func:`sealed_text`) to ``path`` atomically; a file larger than
    readers accept (``max_bytes``) is an error before anything is written."""
    text = sealed_text(doc)
    if len(text) > max_bytes:
        raise ValueError(
            f"calibrator {doc.get('method')!r} would write {len(text)} bytes to {path}, more than "
            f"a calibrator file may hold ({max_bytes}); use a calibrator with fewer "
            "parameters (e.g. vs_b instead of ms_b for many classes)"
        )
    atomic_write_text(path, text)


def read_sealed(path: str | os.PathLike, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """The JSON value of a calibrator file, its size (``max_bytes``), nesting and digest verified;
    the digest key is removed. Errors are one line naming the file and the fix."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(
            f"calibrator file {path} is a directory; pass the .json file fit-calibrator wrote"
        )
    if not path.is_file():
        raise FileNotFoundError(
            f"calibrator file {path} does not exist; run calbench fit-calibrator"
        )
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(
            f"{path} has {size} bytes, more than a calibrator file may ({max_bytes}); "
            "is it the right file? refit it (calbench fit-calibrator)"
        )
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(
            f"{path} is not valid calibrator JSON ({exc}); delete it and refit"
        ) from None
    except RecursionError:
        data, deep = None, True
    else:
        deep = json_depth_exceeds(data, MAX_JSON_DEPTH)
    if deep:
        raise ValueError(
            f"{path} nests deeper than {MAX_JSON_DEPTH} levels, which no calibrator file does; "
            "delete it and refit (calbench fit-calibrator)"
        )
    if not isinstance(data, dict):
        return data  # Calibrator.from_dict names what it holds
    digest = data.pop(DIGEST_KEY, None)
    if digest is None:
        raise ValueError(
            f"{path} holds no {DIGEST_KEY} digest: it was written by an older calbench or by "
            "hand; refit it (calbench fit-calibrator)"
        )
    if digest != canonical_digest(data):
        raise ValueError(
            f"{path} does not match its {DIGEST_KEY} digest: it was changed or damaged after it "
            "was written; delete it and refit (calbench fit-calibrator)"
        )
    return data
