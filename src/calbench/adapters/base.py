"""The adapter base class: another library's calibrator behind calbench's interface.

The libraries' fitted objects are not JSON (and a pickle would run code when loaded), so an
adapter's fitted state is what it was fitted on: the validation probabilities (float64
softmax of the logits, the input every adapted library takes) and labels. Loading refits the
library on them, which the conformance suite checks is deterministic (a bit-exact round trip).
The library's output is clipped to [0, 1] and, where its rows do not sum to 1 (one-vs-rest
maps), divided by the row sum, as scikit-learn's ``CalibratedClassifierCV`` and calbench's own
one-vs-rest calibrators do (a row summing to 0 becomes uniform).
"""

from __future__ import annotations

import contextlib
import io
from typing import Any, ClassVar

import numpy as np

from calbench.calibrators.base import Calibrator, Field
from calbench.functional import softmax


def normalise_rows(p: np.ndarray) -> np.ndarray:
    """``p`` clipped to [0, 1], each row divided by its sum (uniform where the sum is 0)."""
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    s = p.sum(axis=1, keepdims=True)
    k = p.shape[1]
    return np.where(s > 0, p / np.where(s > 0, s, 1.0), 1.0 / k)


def one_vs_rest(fit_1d, p: np.ndarray, y: np.ndarray) -> list:
    """``fit_1d(scores, targets)`` for each class (binary: the positive class only)."""
    cols = [1] if p.shape[1] == 2 else range(p.shape[1])
    return [fit_1d(p[:, j], (y == j).astype(np.float64)) for j in cols]


def apply_one_vs_rest(predict_1d, models: list, p: np.ndarray) -> np.ndarray:
    """The one-vs-rest models' outputs as rows summing to 1 (binary: ``[1 - q, q]``)."""
    if p.shape[1] == 2:
        q = np.clip(np.asarray(predict_1d(models[0], p[:, 1]), dtype=np.float64), 0, 1)
        return np.stack([1.0 - q, q], axis=1)
    cols = [np.asarray(predict_1d(m, p[:, j]), dtype=np.float64) for j, m in enumerate(models)]
    return normalise_rows(np.stack(cols, axis=1))


class Adapter(Calibrator):
    """Base of the adapters: subclasses set ``name``, ``reference``, ``requires`` (modules),
    ``install`` (the pip argument), ``same_as`` and implement ``_fit_lib(p, y)`` -> model and
    ``_predict_lib(model, p)`` -> (N, K) probabilities."""

    requires: ClassVar[tuple[str, ...]] = ()
    install: ClassVar[str] = "'calbench[arena]'"
    #: the calbench method this adapter implements (the report compares them), or None
    same_as: ClassVar[str | None] = None
    state_schema: ClassVar[dict[str, Field]] = {
        "probs": Field(shape=(None, "K"), low=0.0, high=1.0, note="validation probabilities"),
        "labels": Field(shape=(None,), integer=True, low=0.0, note="validation labels"),
    }

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._model: Any = None
        self._fit_data: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def _check_state(cls, state: dict[str, Any], k: int) -> str | None:
        p, y = state["probs"], state["labels"]
        if p.shape[0] != y.shape[0] or p.shape[0] < 2:
            return f"probs has {p.shape[0]} rows and labels {y.shape[0]}: refit"
        if y.size and y.max() >= k:
            return f"labels must lie in [0, {k - 1}]"
        return None

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        p = softmax(np.asarray(logits, dtype=np.float64))
        y = np.asarray(labels, dtype=np.int64)
        self._model = self._quiet(self._fit_lib, p, y)
        self._fit_data = (p, y)

    @staticmethod
    def _quiet(fn, *args):
        """``fn(*args)`` with its progress bars and prints (netcal's BBQ, ENIR) discarded."""
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            return fn(*args)

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        p = softmax(np.asarray(logits, dtype=np.float64))
        return normalise_rows(self._quiet(self._predict_lib, self._model, p))

    def _get_state(self) -> dict[str, Any]:
        p, y = self._fit_data
        return {"probs": p.copy(), "labels": y.copy()}

    def _set_state(self, state: dict[str, Any]) -> None:
        p = np.asarray(state["probs"], dtype=np.float64)
        y = np.asarray(state["labels"], dtype=np.int64)
        self._model = self._quiet(self._fit_lib, p, y)
        self._fit_data = (p, y)

    def n_parameters(self) -> int:  # the stored data are not parameters
        return 0

    def _fit_lib(self, p: np.ndarray, y: np.ndarray) -> Any:
        raise NotImplementedError

    def _predict_lib(self, model: Any, p: np.ndarray) -> np.ndarray:
        raise NotImplementedError
