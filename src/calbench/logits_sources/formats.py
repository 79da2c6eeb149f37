"""Readers of published and user-supplied logits files (``logits.format`` of a model entry).

Each reader returns :class:`Imported`: float32 logits ``(N, K)``, int64 labels ``(N,)`` and, for
sources that come pre-split, the validation and test row indices. Float32 logits are kept as they
are; wider ones lose nothing the probabilities depend on (:func:`calbench.logits.float32_logits`:
each row's maximum is subtracted before a cast that would round). A file in the wrong format is
a one-line :class:`ValueError` naming the file, what was expected and the fix.

* ``coursework`` (Vasilev, MSU 2021; published logits, replication notes §1.1): one
  ``torch.save``'d float32 tensor ``[N, K]`` per model (the whole test set in the dataset's
  order; read by :func:`read_torch_tensor`: torch's zip container without importing torch,
  anything else with ``torch.load(weights_only=True)``), plus one ``targets.txt`` per dataset folder
  (integers joined by ``"\\n"``, no trailing newline). The study's ImageNet folder has no
  ``targets.txt``; its labels are the class-folder order ``[0]*50, [1]*50, ...`` and are
  synthesised only when the model entry says ``targets: class_blocks``. The study split
  (:mod:`calbench.split`) is applied afterwards, as for every model.
* ``kull_pickle`` (Kängsepp's logits used by Guo et al. 2017 and Kull et al. 2019, NeurIPS,
  "Beyond temperature scaling"): ``pickle.dump([(logits_val, y_val), (logits_test, y_test)])``
  with labels of shape ``(n, 1)`` in varying integer dtypes (uint8, int32, int64). Pre-split:
  rows ``0 .. n_val-1`` are the validation part, the rest the test part. The single-tuple
  variant ``(logits, labels)`` (dirichletcal's own files) is split as their ``unpickle_probs``
  does: scikit-learn ``train_test_split(test_size=n - 5000, random_state=15)``. Pickles are read
  with :class:`NumpyOnlyUnpickler`, which reconstructs numpy arrays and nothing else.
* ``npz``: the user's own ``logits`` ``(N, K)`` and ``labels`` ``(N,)`` (or ``(N, 1)``) in one
  ``.npz``; optional ``val_idx`` / ``test_idx`` (a partition of ``range(N)``) are used when the
  entry says ``split: file``. Read with ``allow_pickle=False``.
* ``calarena``, ``lm_eval``, ``helm``: CalArena's HDF5 benchmarks (:mod:`.calarena`),
  lm-evaluation-harness ``--log_samples`` JSONL (:mod:`.lm_eval`) and a HELM run's
  ``scenario_state.json`` (:mod:`.helm`); their readers return arrays checked here like the rest.
"""

from __future__ import annotations

import functools
import pickle
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calbench import io
from calbench._checks import as_numpy, check_input_file
from calbench.logits_sources.calarena import read_calarena
from calbench.logits_sources.helm import read_helm
from calbench.logits_sources.lm_eval import read_lm_eval
from calbench.logits_sources.torchzip import Unsupported, is_zip, read_pt_zip

FORMATS = ("coursework", "kull_pickle", "npz", "calarena", "lm_eval", "helm")
#: Formats whose files carry their own validation/test split (``split: file`` by default).
PRESPLIT_BY_DEFAULT = frozenset({"kull_pickle", "calarena"})
#: Readers taking the entry's options: ``(path, options) -> (logits, labels, split or None)``.
OPTION_READERS = {"calarena": read_calarena, "lm_eval": read_lm_eval, "helm": read_helm}
#: ``targets:`` values of a coursework entry.
TARGETS = ("file", "class_blocks")


@dataclass
class Imported:
    """What a reader returns: ``logits`` float32 (N, K), ``labels`` int64 (N,), and the file's own
    split ``(val_idx, test_idx)`` (int64) or None."""

    logits: np.ndarray
    labels: np.ndarray
    split: tuple[np.ndarray, np.ndarray] | None = None


# --------------------------------------------------------------------------- common checks


def _as_logits(arr, path, what: str = "logits") -> np.ndarray:
    """Float logits as float32: float32 as they are, wider ones without losing what the
    probabilities depend on (:func:`calbench.logits.float32_logits`: a row's maximum is
    subtracted first where a direct cast would round)."""
    from calbench.logits import float32_logits  # lazy: code inputs

    arr = np.asarray(arr)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.floating):
        raise ValueError(f"{path}: {what} have dtype {arr.dtype}, expected float32 numbers")
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 2:
        raise ValueError(
            f"{path}: {what} have shape {arr.shape}, expected (samples, classes) with >= 2 classes"
        )
    return float32_logits(arr, f"{path}: {what}")


def _as_labels(arr, n: int, k: int, path, what: str = "labels") -> np.ndarray:
    arr = np.asarray(arr)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"{path}: {what} have dtype {arr.dtype}, expected integer class indices (not one-hot)"
        )
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{path}: {what} have shape {arr.shape}, expected ({n},) or ({n}, 1)")
    if arr.shape[0] != n:
        raise ValueError(f"{path}: {arr.shape[0]} {what} for {n} rows of logits; they must pair up")
    y = arr.astype(np.int64)
    if y.size and (y.min() < 0 or y.max() >= k):
        raise ValueError(
            f"{path}: {what} range over [{y.min()}, {y.max()}] but the logits have {k} classes"
        )
    return y


def check_split(val_idx, test_idx, n: int, path) -> tuple[np.ndarray, np.ndarray]:
    """``(val_idx, test_idx)`` as int64 if together they are a partition of ``range(n)``
    (:func:`calbench.split.check_partition`, the one check of every split)."""
    from calbench.split import check_partition  # lazy: code inputs

    return check_partition(
        val_idx, test_idx, n, path, "fix val_idx/test_idx in the file, or use split: study"
    )


# --------------------------------------------------------------------------- coursework


def read_torch_tensor(path) -> np.ndarray:
    """A ``torch.save``'d float tensor ``[N, K]`` as float32 numpy.

    The zip container (torch >= 1.6) is read without importing torch by :func:`read_pt_zip`
    (importing torch costs seconds and ~0.6 GB here, more than reading a 200 MB file); anything
    it does not handle goes to ``torch.load(weights_only=True)``. Neither runs code from the file.
    """
    if is_zip(path):
        try:
            return _as_logits(read_pt_zip(path), path)
        except Unsupported:
            pass
    import torch

    try:
        obj = torch.load(path, map_location="cpu", weights_only=True, mmap=is_zip(path))
    except Exception as exc:  # pickle errors, truncated zip, objects weights_only refuses
        first = (str(exc).splitlines() or [""])[0][:160]
        raise ValueError(
            f"{path} is not a torch-saved tensor (format coursework; {type(exc).__name__}: "
            f"{first}); check logits.format or download the file again"
        ) from None
    if not isinstance(obj, torch.Tensor):
        raise ValueError(
            f"{path} holds a {type(obj).__name__}, not a logits tensor [N, K] (format coursework)"
        )
    if not obj.is_floating_point():
        raise ValueError(f"{path}: tensor dtype {obj.dtype}, expected float32 logits")
    return _as_logits(as_numpy(obj), path)


_INT_LINE = re.compile(rb"-?[0-9]+")


def read_targets(path, n: int | None = None) -> np.ndarray:
    """The study's ``targets.txt``: integers joined by ``"\\n"`` (one trailing newline tolerated)."""
    data = Path(path).read_bytes()
    if data.endswith(b"\n"):
        data = data[:-1]
    lines = data.split(b"\n") if data else []
    if not lines:
        raise ValueError(f"{path} is empty; expected one integer label per line")
    bad = next((i for i, s in enumerate(lines) if not _INT_LINE.fullmatch(s.strip(b"\r"))), None)
    if bad is not None:
        raise ValueError(
            f"{path}: line {bad + 1} ({lines[bad][:20]!r}) is not an integer label; "
            "expected integers joined by newlines (targets.txt)"
        )
    y = np.array([int(s) for s in lines], dtype=np.int64)
    if n is not None and y.shape[0] != n:
        raise ValueError(f"{path} has {y.shape[0]} labels but the logits have {n} rows")
    return y


def class_blocks(n: int, k: int) -> np.ndarray:
    """Labels in class-folder order, ``[0]*(n/k), [1]*(n/k), ...`` (ImageNet's 50 per class)."""
    if n % k:
        raise ValueError(
            f"targets: class_blocks needs the row count ({n}) to be a multiple of the classes ({k})"
        )
    return np.repeat(np.arange(k, dtype=np.int64), n // k)


def read_coursework(path, targets=None, *, synthesise: bool = False) -> Imported:
    """One coursework model: the tensor file and its folder's ``targets.txt`` (or, only with
    ``synthesise=True`` and no ``targets``, the class-folder order)."""
    logits = read_torch_tensor(path)
    n, k = logits.shape
    if targets is not None:
        y = read_targets(targets, n)
    elif synthesise:
        y = class_blocks(n, k)
    else:
        raise ValueError(
            f"no targets.txt for {path}; put it beside the file, or set targets: class_blocks "
            "in the model's logits entry if the rows are in class-folder order"
        )
    return Imported(logits, _as_labels(y, n, k, targets or path))


# --------------------------------------------------------------------------- kull_pickle


class NumpyOnlyUnpickler(pickle.Unpickler):
    """An unpickler that rebuilds numpy arrays, dtypes and scalars and refuses every other global.

    ``pickle.load`` runs arbitrary code named in the file; this one only resolves the numpy
    reconstruction functions an ``ndarray`` pickle names, so a crafted file fails to load.
    """

    @staticmethod
    @functools.cache
    def _allowed():
        try:
            from numpy._core import multiarray as ma  # numpy >= 2
        except ImportError:  # pragma: no cover - numpy 1.x
            from numpy.core import multiarray as ma
        try:
            from numpy._core import numeric as nu
        except ImportError:  # pragma: no cover
            from numpy.core import numeric as nu
        table = {}
        for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
            table[(mod, "_reconstruct")] = ma._reconstruct
            table[(mod, "scalar")] = ma.scalar
        for mod in ("numpy.core.numeric", "numpy._core.numeric"):
            table[(mod, "_frombuffer")] = nu._frombuffer
        table[("numpy", "ndarray")] = np.ndarray
        table[("numpy", "dtype")] = np.dtype
        return table

    def find_class(self, module, name):
        fn = self._allowed().get((module, name))
        if fn is None:
            raise pickle.UnpicklingError(
                f"global {module}.{name} is not allowed (only numpy arrays may be unpickled)"
            )
        return fn


def load_numpy_pickle(path):
    """``pickle.load`` restricted to numpy arrays (:class:`NumpyOnlyUnpickler`)."""
    try:
        with open(path, "rb") as fh:
            return NumpyOnlyUnpickler(fh, encoding="latin1").load()
    except Exception as exc:
        first = (str(exc).splitlines() or [""])[0][:160]
        raise ValueError(
            f"{path} is not a pickle of numpy arrays (format kull_pickle; {type(exc).__name__}: "
            f"{first}); check logits.format or download the file again"
        ) from None


def dirichletcal_split(n: int, n_val: int = 5000, seed: int = 15) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn ``train_test_split(test_size=n - n_val, random_state=seed)`` of ``range(n)``
    as ``(val_idx, test_idx)``: ShuffleSplit takes ``perm = RandomState(seed).permutation(n)``,
    test = ``perm[:n - n_val]``, train (our validation part) = the rest."""
    if n <= n_val:
        raise ValueError(f"a single (logits, labels) pickle needs more than {n_val} rows, got {n}")
    perm = np.random.RandomState(seed).permutation(n).astype(np.int64)
    return perm[n - n_val :].copy(), perm[: n - n_val].copy()


def read_kull_pickle(path) -> Imported:
    """A Kängsepp pickle ``[(logits_val, y_val), (logits_test, y_test)]`` (or one tuple)."""
    obj = load_numpy_pickle(path)
    expect = "[(logits_val, y_val), (logits_test, y_test)] or (logits, labels)"

    def pair(p, what):
        if not isinstance(p, (tuple, list)) or len(p) != 2:
            raise ValueError(f"{path}: expected {expect}, found {type(p).__name__} at {what}")
        z = _as_logits(p[0], path, f"{what} logits")
        return z, _as_labels(p[1], z.shape[0], z.shape[1], path, f"{what} labels")

    if (
        isinstance(obj, (tuple, list))
        and len(obj) == 2
        and all(isinstance(p, (tuple, list)) for p in obj)
    ):
        (zv, yv), (zt, yt) = pair(obj[0], "validation"), pair(obj[1], "test")
        if zv.shape[1] != zt.shape[1]:
            raise ValueError(
                f"{path}: validation logits have {zv.shape[1]} classes, test logits {zt.shape[1]}"
            )
        logits = np.concatenate([zv, zt])
        nv = zv.shape[0]
        split = (np.arange(nv, dtype=np.int64), np.arange(nv, logits.shape[0], dtype=np.int64))
        return Imported(logits, np.concatenate([yv, yt]), split)
    if isinstance(obj, (tuple, list)) and len(obj) == 2 and isinstance(obj[0], np.ndarray):
        z, y = pair(obj, "the file")
        return Imported(z, y, dirichletcal_split(z.shape[0]))
    raise ValueError(f"{path}: expected {expect}, found {type(obj).__name__}")


# --------------------------------------------------------------------------- npz


def read_npz(path, *, use_split: bool = False) -> Imported:
    """The user's ``.npz``: ``logits``, ``labels`` and (with ``use_split``) ``val_idx``/``test_idx``;
    a ``.pt`` file holds the same keys as a dict of tensors (:func:`read_pt_dict`)."""
    if Path(path).suffix.lower() == ".pt":
        data = read_pt_dict(path)
    else:
        data = io.read_npz(
            path, "logits file", "save it with np.savez(path, logits=..., labels=...) (format npz)"
        )
    missing = [k for k in ("logits", "labels") if k not in data]
    if missing:
        raise ValueError(
            f"{path} lacks {missing} (has {sorted(data)}); save it with "
            "np.savez(path, logits=..., labels=...)"
        )
    logits = _as_logits(data["logits"], path)
    labels = _as_labels(data["labels"], logits.shape[0], logits.shape[1], path)
    split = None
    if use_split:
        if "val_idx" not in data or "test_idx" not in data:
            raise ValueError(
                f"{path} has no val_idx/test_idx but the entry says split: file; add them or "
                "use split: study"
            )
        split = check_split(data["val_idx"], data["test_idx"], logits.shape[0], path)
    return Imported(logits, labels, split)


def read_pt_dict(path) -> dict[str, np.ndarray]:
    """A ``torch.save``'d dict of tensors or arrays (``{"logits": ..., "labels": ...}``) as
    numpy arrays, read with ``torch.load(weights_only=True)`` (runs no code from the file)."""
    import torch

    fix = 'save it with torch.save({"logits": logits, "labels": labels}, path)'
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # pickle errors, truncated zip, objects weights_only refuses
        first = (str(exc).splitlines() or [""])[0][:160]
        raise ValueError(
            f"{path} is not a torch-saved dict of logits and labels ({type(exc).__name__}: "
            f"{first}); {fix}"
        ) from None
    if not isinstance(obj, dict):
        raise ValueError(
            f"{path} holds a {type(obj).__name__}, not a dict of logits and labels; {fix}"
        )
    return {
        str(k): (v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else np.asarray(v))
        for k, v in obj.items()
    }


def read(
    fmt: str, path, *, targets=None, synthesise_targets=False, use_split=None, options=None
) -> Imported:
    """Dispatch on ``fmt`` (one of :data:`FORMATS`); ``options``: the model's ``logits:`` entry
    (the keys the :data:`OPTION_READERS` take, e.g. calarena's ``group``)."""
    check_input_file(path, "logits file", "check logits.file or pass --file")
    if fmt in OPTION_READERS:
        z, y, split = OPTION_READERS[fmt](path, options or {})
        logits = _as_logits(z, path)
        labels = _as_labels(y, logits.shape[0], logits.shape[1], path)
        if use_split and split is None:
            raise ValueError(f"{path}: format {fmt} has no split of its own; use split: study")
        split = check_split(*split, logits.shape[0], path) if use_split else None
        return Imported(logits, labels, split)
    if fmt == "coursework":
        return read_coursework(path, targets, synthesise=synthesise_targets)
    if fmt == "kull_pickle":
        return read_kull_pickle(path)
    if fmt == "npz":
        return read_npz(path, use_split=bool(use_split))
    raise ValueError(f"unknown logits format {fmt!r}; use one of {list(FORMATS)}")
