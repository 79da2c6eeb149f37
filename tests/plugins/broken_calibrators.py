"""Deliberately broken calibrators, each failing one conformance check (tests/plugins)."""

from __future__ import annotations

import numpy as np

from calbench.calibrators.base import Calibrator, Field
from calbench.functional import softmax


class Shrink(Calibrator):
    """A correct baseline: ``(1 - a) softmax + a / K`` with ``a`` = validation error rate / 2."""

    name = "shrink"
    reference = "a test calibrator, 2026"
    state_schema = {"a": Field(shape=(), low=0.0, high=1.0)}

    def __init__(self) -> None:
        super().__init__()
        self.a_ = None

    def _fit(self, z, y):
        self.a_ = float(np.mean(np.argmax(z, axis=1) != y)) / 2

    def _predict_proba(self, z):
        p = softmax(np.asarray(z, dtype=np.float64))
        return (1 - self.a_) * p + self.a_ / p.shape[1]

    def _get_state(self):
        return {"a": self.a_}

    def _set_state(self, state):
        self.a_ = float(state["a"])


class NotNormalised(Shrink):
    def _predict_proba(self, z):
        return super()._predict_proba(z) * 0.9


class Random(Shrink):
    def _fit(self, z, y):
        super()._fit(z, y)
        self.a_ = min(1.0, self.a_ + float(np.random.default_rng().random()) * 1e-3)


class LossyState(Shrink):
    def _get_state(self):
        return {"a": float(np.float32(self.a_))}


class LayoutDependent(Shrink):
    def fit(self, logits, labels, **kw):
        super().fit(logits, labels, **kw)
        if getattr(logits, "flags", None) is not None and not logits.flags.c_contiguous:
            self.a_ = min(1.0, self.a_ + 0.01)
        return self


class AcceptsProbabilities(Shrink):
    def fit(self, logits, labels, **kw):
        return super().fit(logits, labels, allow_probabilities=True)


class SilentOnNaN(Shrink):
    def predict_proba(self, logits, **kw):
        if isinstance(logits, np.ndarray) and np.isnan(logits).any():
            return np.full(logits.shape, 1.0 / logits.shape[1])
        return super().predict_proba(logits, **kw)


class Crashes(Shrink):
    def _fit(self, z, y):
        raise RuntimeError("the solver diverged")
