"""Input validation shared by every public function.

Every check raises a one-line :class:`ValueError` that names what is wrong and how to fix it.
Metrics take probabilities, calibrators take logits: passing logits where probabilities belong
is the most common user error in calibration toolkits, so :func:`check_probs` refuses arrays
whose values leave [0, 1] or whose rows do not sum to 1.
"""

from __future__ import annotations

import os

import numpy as np

#: Largest allowed |row sum - 1| for probability arrays (float32 softmax of 1000 classes is ~1e-6).
ROW_SUM_ATOL = 1e-4


def as_numpy(x) -> np.ndarray:
    """``x`` as a NumPy array: torch tensors (any device, ``requires_grad`` or not) are detached
    and copied to the CPU; NumPy arrays are returned as they are; other sequences through
    ``np.asarray``."""
    mod = type(x).__module__ or ""
    if mod.startswith("torch") and hasattr(x, "detach"):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":  # NumPy has no bfloat16
            x = x.float()
        return x.numpy()
    return np.asarray(x)


def numpy_dtype(dtype) -> np.dtype | None:
    """``dtype`` (a NumPy dtype, a torch dtype such as ``torch.float32``, or None) as a NumPy
    dtype, or None when it names none."""
    if dtype is None:
        return None
    text = str(dtype)
    if text.startswith("torch."):
        text = {"bfloat16": "float32"}.get(text[6:], text[6:])
    try:
        return np.dtype(text if isinstance(dtype, str) or text != str(dtype) else dtype)
    except TypeError:
        return None


def _as_2d_float(x, what: str) -> np.ndarray:
    """A C-contiguous float32 or float64 (N, K) array: every memory layout (Fortran order,
    strided slices) and float dtype is accepted; float16 is widened to float32 (NumPy's half
    precision reductions lose too much), integers to float64."""
    arr = as_numpy(x)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        raise ValueError(f"{what} must be a numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(
            f"{what} must be a 2-D array of shape (N, K), got shape {arr.shape}; "
            "reshape to (n_samples, n_classes)"
        )
    if arr.shape[0] == 0:
        raise ValueError(f"{what} is empty (shape {arr.shape}); pass at least one sample")
    if arr.shape[1] < 2:
        raise ValueError(f"{what} must have at least 2 classes (columns), got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    elif arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float32 if arr.dtype.itemsize < 4 else np.float64)
    return np.ascontiguousarray(arr)


def _all_finite(arr: np.ndarray) -> bool:
    """Whether every entry of a floating 2-D array is finite, without an (N, K) temporary.

    Blocks of rows are summed in float64: a NaN or infinity makes the sum non-finite, and a
    finite sum proves every entry finite. A non-finite sum of finite float64 entries (overflow)
    is settled by ``np.isfinite`` on that block alone.
    """
    n, k = arr.shape
    rows = max(1, _BLOCK_BYTES // (k * arr.itemsize))
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, n, rows):
            blk = arr[start : start + rows]
            if not np.isfinite(blk.sum(dtype=np.float64)) and not np.all(np.isfinite(blk)):
                return False
    return True


def check_logits(logits, name: str = "logits") -> np.ndarray:
    """Return ``logits`` as a finite floating (N, K) array (float32 and float64 kept as they are)."""
    arr = _as_2d_float(logits, name)
    if not _all_finite(arr):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        if bad == np.count_nonzero(np.isneginf(arr)):
            raise ValueError(
                f"{name} contain {bad} -inf values (masked classes?); pass finite logits: drop "
                "the columns of classes masked in every row (renumbering the labels), or put a "
                "finite value far below the row instead of -inf (its finite minimum - 1e4 gives "
                "the same softmax)"
            )
        raise ValueError(
            f"{name} contain {bad} NaN or infinite values; fix the model output or drop those rows"
        )
    return arr


#: Rows are scanned in blocks of about this many bytes, so each block is read from memory once
#: and its row sums, minimum and (optionally) argmax are computed from cache.
_BLOCK_BYTES = 1 << 19


def _scan_rows(arr: np.ndarray, want_argmax: bool):
    """Row sums (float64), global minimum and optionally row argmax, in one cache-blocked pass."""
    n, k = arr.shape
    rows = max(1, _BLOCK_BYTES // (k * arr.itemsize))
    sums = np.empty(n, dtype=np.float64)
    pred = np.empty(n, dtype=np.intp) if want_argmax else None
    lo = np.inf
    for start in range(0, n, rows):
        blk = arr[start : start + rows]
        blk.sum(axis=1, dtype=np.float64, out=sums[start : start + rows])
        lo = min(lo, float(blk.min()))
        if want_argmax:
            np.argmax(blk, axis=1, out=pred[start : start + rows])
    return sums, lo, pred


#: Row-sum tolerance for float16 input: rounding each entry to half precision (relative error
#: 2**-11) moves a row sum by up to about 5e-4.
ROW_SUM_ATOL_FLOAT16 = 2e-3


def check_probs(
    probs, name: str = "probs", atol: float | None = None, *, _argmax: list | None = None
) -> np.ndarray:
    """Return ``probs`` as a floating (N, K) array after checking it holds probabilities.

    float32 and float64 inputs are returned as they are (no copy). One cache-blocked pass over
    the data computes the float64 row sums (NaN and infinities propagate into them) and the
    minimum; values above 1 cannot hide, since a row summing to 1 with an entry above 1 has a
    negative entry.
    """
    half = str(getattr(probs, "dtype", "")) in ("float16", "torch.float16", "torch.bfloat16")
    if atol is None:
        atol = ROW_SUM_ATOL_FLOAT16 if half else ROW_SUM_ATOL
    arr = _as_2d_float(probs, name)
    sums, lo, pred = _scan_rows(arr, _argmax is not None)
    if _argmax is not None:
        _argmax.append(pred)
    if not np.all(np.isfinite(sums)):
        raise ValueError(f"{name} contain NaN or infinite values; pass finite probabilities")
    dev = np.abs(sums - 1.0)
    row = int(np.argmax(dev))
    if lo < 0.0 or (dev[row] > atol and float(arr.max()) > 1.0):
        raise ValueError(
            f"{name} must lie in [0, 1] but range over [{lo:.4g}, {float(arr.max()):.4g}]; "
            "did you pass logits? apply softmax (calbench.softmax) or a calibrator's predict_proba first"
        )
    if dev[row] > atol:
        raise ValueError(
            f"{name} rows must sum to 1 but row {row} sums to {sums[row]:.6g} (tolerance {atol:g}); "
            "normalize rows or apply softmax to logits"
        )
    return arr


def check_labels(labels, n: int, k: int, name: str = "labels") -> np.ndarray:
    """Return ``labels`` as a C-contiguous int64 (N,) array with values in [0, k) (any integer
    dtype, integral floats, NumPy arrays or torch tensors)."""
    arr = as_numpy(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of class indices, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(
            f"{name} has {arr.shape[0]} entries but there are {n} rows of scores; pass one label per row"
        )
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} must be integer class indices, got non-integer floats")
    elif not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be integer class indices, got dtype {arr.dtype}")
    if arr.dtype == np.uint64 and n and int(arr.max()) >= k:  # would wrap to negative int64
        raise ValueError(
            f"{name} must lie in [0, {k - 1}] for {k} classes, got maximum {int(arr.max())}"
        )
    arr = np.ascontiguousarray(arr.astype(np.int64, copy=False))
    if n and (arr.min() < 0 or arr.max() >= k):
        raise ValueError(
            f"{name} must lie in [0, {k - 1}] for {k} classes, got range [{arr.min()}, {arr.max()}]"
        )
    return arr


#: Largest number of bins anything accepts (plots, metrics, binning calibrators): far beyond
#: any study's 10-20, small enough that per-bin arrays and figures stay cheap.
MAX_BINS = 10_000


def check_n_bins(n_bins, *, name: str = "n_bins", high: int = MAX_BINS) -> int:
    """Return ``n_bins`` as an int in [1, ``high``]."""
    if isinstance(n_bins, bool) or not isinstance(n_bins, int | np.integer) or n_bins < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {n_bins!r}")
    if n_bins > high:
        raise ValueError(f"{name} = {n_bins} is too large; use at most {high} bins")
    return int(n_bins)


def check_bounded_int(value, name: str, low: int, high: int) -> int:
    """Return ``value`` as an int in [``low``, ``high``] (a user-controlled size or count)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} = {value} is out of range; use an integer in [{low}, {high}]")
    return int(value)


def check_input_file(path, what: str, fix: str):
    """Return ``path`` if it is an existing regular file; else a one-line error that says what it
    is: ``ValueError`` for a directory or for something that is not a regular file (a device
    such as ``/dev/zero``, a FIFO, a socket: reading those never ends or gives no file to
    hash), ``FileNotFoundError`` for a missing path (``fix`` says how to make it, e.g. "run
    calbench split first")."""
    why = not_regular_file(path)
    if why == "missing":
        raise FileNotFoundError(f"{what} {path} does not exist; {fix}")
    if why is not None:
        raise ValueError(f"{what} {path} is {why}; pass the file itself")
    return path


def not_regular_file(path) -> str | None:
    """Why ``path`` is not an existing regular file (symbolic links followed): ``"missing"``,
    ``"a directory, not a file"``, ``"not a regular file (a device, FIFO or socket)"``, or
    ``None`` for a regular file."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except OSError as exc:  # permission denied, a loop of links, a name too long
        return f"not readable ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "a directory, not a file"
    if not stat.S_ISREG(mode):
        return "not a regular file (a device, FIFO or socket)"
    return None


def check_choice(value, name: str, choices) -> str:
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def check_probs_labels(probs, labels, *, with_argmax: bool = False):
    """Validate a (probabilities, labels) pair, the input of every metric.

    Returns ``(probs, labels)``, or ``(probs, labels, argmax)`` with ``with_argmax=True``: the
    row argmax (first of tied maxima) comes from the validation pass at no extra memory traffic.
    """
    box: list | None = [] if with_argmax else None
    p = check_probs(probs, _argmax=box)
    y = check_labels(labels, p.shape[0], p.shape[1])
    return (p, y, box[0]) if with_argmax else (p, y)


def check_logits_labels(logits, labels) -> tuple[np.ndarray, np.ndarray]:
    """Validate a (logits, labels) pair, the input of every calibrator's ``fit``."""
    z = check_logits(logits)
    y = check_labels(labels, z.shape[0], z.shape[1])
    return z, y


#: How far outside [0, 1] a prediction may lie by rounding (float32 probabilities) and is
#: clipped.
_PROB_ROUNDING = 1e-6


def check_binary_pairs(f, y) -> tuple[np.ndarray, np.ndarray]:
    """Predictions ``f`` in [0, 1] (clipped by up to :data:`_PROB_ROUNDING` of rounding) and
    outcomes ``y`` in {0, 1}, one per sample, as float64: the input of the binary calibration
    tests and of the smooth ECE."""
    f = np.asarray(f, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if f.ndim != 1 or y.shape != f.shape or f.shape[0] == 0:
        raise ValueError(
            f"predictions and outcomes must be non-empty 1-D arrays of one length, got shapes "
            f"{f.shape} and {y.shape}"
        )
    if not (
        np.all(np.isfinite(f)) and f.min() >= -_PROB_ROUNDING and f.max() <= 1.0 + _PROB_ROUNDING
    ):
        raise ValueError("predictions must lie in [0, 1]; pass probabilities, not logits")
    f = np.clip(f, 0.0, 1.0)  # float32 rows may exceed 1 by rounding
    if not np.all((y == 0.0) | (y == 1.0)):
        raise ValueError("outcomes must be 0 or 1; pass correctness (top-label) or a binary label")
    return f, y


#: Longest name (model, dataset, display name) read from a file or a spec.
MAX_TEXT = 200
#: A leading character that makes a spreadsheet evaluate a cell as a formula (OWASP's CSV
#: injection list: '=', '+', '-', '@'; tab and carriage return are refused as control characters).
FORMULA_START = ("=", "+", "-", "@")
#: Unicode categories refused in names: control, format (bidirectional overrides, zero-width),
#: surrogate, private-use and unassigned characters, and the line and paragraph separators.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def check_text(value, what: str, fix: str) -> str:
    """Return ``value`` if it is a plain name that may reach a CSV, a table or a figure: a
    non-empty ``str`` (a 0-d NumPy string array is taken as its string; arrays of several
    strings, bytes and other types are refused) of at most :data:`MAX_TEXT` characters, without
    control or invisible format characters (newlines, tabs, NUL, bidirectional overrides), not
    starting or ending with a space, and not starting with a spreadsheet formula character
    (:data:`FORMULA_START`). Else a one-line ``ValueError`` naming ``what`` and ``fix``."""
    import unicodedata

    if isinstance(value, np.ndarray):
        if value.ndim != 0 or value.dtype.kind != "U":
            kind = f"an array of shape {value.shape}" if value.ndim else f"a {value.dtype} value"
            raise ValueError(f"{what} is {kind}, not a string; {fix}")
        value = str(value)
    if isinstance(value, np.str_):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"{what} is a {type(value).__name__}, not a string; {fix}")
    shown = repr(value[:40]) + ("..." if len(value) > 40 else "")
    if not value:
        raise ValueError(f"{what} is empty; {fix}")
    if len(value) > MAX_TEXT:
        raise ValueError(f"{what} {shown} has {len(value)} characters (at most {MAX_TEXT}); {fix}")
    bad = next((c for c in value if unicodedata.category(c) in _UNSAFE_CATEGORIES), None)
    if bad is not None:
        raise ValueError(
            f"{what} {shown} holds the control character {bad!r} (newlines, tabs and invisible "
            f"characters break CSV rows and tables); {fix}"
        )
    if value != value.strip():
        raise ValueError(f"{what} {shown} starts or ends with a space; {fix}")
    if value.startswith(FORMULA_START):
        raise ValueError(
            f"{what} {shown} starts with {value[0]!r}, which a spreadsheet opening the CSVs "
            f"would run as a formula; {fix}"
        )
    return value


def json_depth_exceeds(value, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` containers deep (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict | list):
            if d > limit:
                return True
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return False
