"""Base class, registry and (de)serialisation shared by every calibrator.

A calibrator is sklearn-style: ``fit(logits, labels)`` returns ``self`` and
``predict_proba(logits)`` returns an ``(N, K)`` array of probabilities whose rows sum to 1.
Its hyperparameters (constructor arguments) and fitted state serialise to a JSON-able dict, so a
fitted calibrator is a small file that round-trips bit-exactly::

    {"method": "ts", "params": {...constructor kwargs...}, "state": {...fitted arrays...}}

Subclasses set ``name`` (the registry key), implement ``_fit``, ``_predict_proba``,
``_get_state`` and ``_set_state``, and register themselves with :func:`register`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from calbench._checks import check_logits, check_logits_labels
from calbench.io import atomic_write_text

REGISTRY: dict[str, type[Calibrator]] = {}


def register(cls: type[Calibrator]) -> type[Calibrator]:
    """Class decorator: add ``cls`` to :data:`REGISTRY` under ``cls.name``."""
    if not getattr(cls, "name", None):
        raise TypeError(f"{cls.__name__} needs a non-empty class attribute 'name'")
    if cls.name in REGISTRY and REGISTRY[cls.name] is not cls:
        raise TypeError(f"calibrator name {cls.name!r} is registered twice")
    REGISTRY[cls.name] = cls
    return cls


def to_jsonable(value: Any) -> Any:
    """Convert numpy arrays/scalars (recursively) into lists/floats that JSON stores exactly.

    Arrays become ``{"__ndarray__": nested list, "dtype": "float32"}`` so dtype survives the
    round trip; Python's float repr is exact for float64 and therefore for float32 too.
    """
    if isinstance(value, np.ndarray):
        return {"__ndarray__": value.tolist(), "dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


def from_jsonable(value: Any) -> Any:
    """Inverse of :func:`to_jsonable`."""
    if isinstance(value, dict):
        if "__ndarray__" in value:
            arr = np.array(value["__ndarray__"], dtype=value["dtype"])
            return arr.reshape(value.get("shape", arr.shape))
        return {k: from_jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_jsonable(v) for v in value]
    return value


class Calibrator:
    """Common interface of all calibrators (see module docstring)."""

    name: ClassVar[str] = ""

    def __init__(self, **params: Any) -> None:
        self._params = dict(params)
        self.n_classes_: int | None = None

    # --- public API -------------------------------------------------------------------------
    def fit(self, logits, labels) -> Calibrator:
        """Fit on validation ``logits`` (N, K) and integer ``labels`` (N,); return ``self``."""
        z, y = check_logits_labels(logits, labels)
        self.n_classes_ = None  # a failed (re)fit must not leave the object looking fitted
        self._fit(z, y)
        self.n_classes_ = int(z.shape[1])
        return self

    def predict_proba(self, logits) -> np.ndarray:
        """Calibrated probabilities (N, K) for ``logits`` (N, K); rows sum to 1."""
        if self.n_classes_ is None:
            raise ValueError(
                f"{type(self).__name__} is not fitted; call fit(logits, labels) before predict_proba"
            )
        z = check_logits(logits)
        if z.shape[1] != self.n_classes_:
            raise ValueError(
                f"logits have {z.shape[1]} classes but the calibrator was fitted on {self.n_classes_}"
            )
        return self._predict_proba(z)

    def get_params(self) -> dict[str, Any]:
        """Constructor keyword arguments (hyperparameters)."""
        return dict(self._params)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict holding method name, hyperparameters and fitted state."""
        state = None
        if self.n_classes_ is not None:
            state = {"n_classes": self.n_classes_, **self._get_state()}
        return {"method": self.name, "params": to_jsonable(self._params), "state": to_jsonable(state)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibrator:
        """Rebuild a (fitted) calibrator from :meth:`to_dict` output; dispatches on ``method``."""
        method = data.get("method")
        target = REGISTRY.get(method) if cls is Calibrator else cls
        if target is None:
            raise ValueError(f"unknown calibrator method {method!r}; known: {sorted(REGISTRY)}")
        if target.name != method:
            raise ValueError(f"dict is for method {method!r}, not {target.name!r}")
        obj = target(**from_jsonable(data.get("params") or {}))
        state = from_jsonable(data.get("state"))
        if state is not None:
            obj.n_classes_ = int(state.pop("n_classes"))
            obj._set_state(state)
        return obj

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._params.items())
        return f"{type(self).__name__}({args})"

    # --- to implement -----------------------------------------------------------------------
    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        raise NotImplementedError

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _get_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def _set_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


def get_calibrator(name: str, **params: Any) -> Calibrator:
    """Instantiate the registered calibrator ``name`` with hyperparameters ``params``."""
    if name not in REGISTRY:
        raise ValueError(f"unknown calibrator {name!r}; choose one of {sorted(REGISTRY)}")
    return REGISTRY[name](**params)


def save_calibrator(calibrator: Calibrator, path: str | os.PathLike) -> None:
    """Write ``calibrator.to_dict()`` as JSON to ``path`` atomically (no partial file on error)."""
    atomic_write_text(path, json.dumps(calibrator.to_dict(), indent=1, allow_nan=False))


def load_calibrator(path: str | os.PathLike) -> Calibrator:
    """Read a calibrator written by :func:`save_calibrator`."""
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid calibrator JSON ({exc}); delete it and refit") from exc
    return Calibrator.from_dict(data)
