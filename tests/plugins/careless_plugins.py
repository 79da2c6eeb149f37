"""Careless plug-in calibrators and metrics (issue 39, groups 1, 8-10): each does one thing a
plug-in must not (change its input in place, return a reused buffer, return the wrong kind of
output, raise, hang), or contradicts its declared direction (tests/plugins)."""

from __future__ import annotations

import time

import numpy as np
from broken_calibrators import Shrink

from calbench.plugins import metric


class ScalesInPlace(Shrink):
    """Scales the logits it is given by 10, in place, before fitting."""

    def fit(self, logits, labels, **kw):
        logits *= 10
        return super().fit(logits, labels, **kw)


class ReusedBuffer(Shrink):
    """Writes every prediction into one buffer and returns it."""

    def predict_proba(self, logits, **kw):
        p = super().predict_proba(logits, **kw)
        buf = getattr(self, "buf_", None)
        if buf is None or buf.shape != p.shape:
            buf = self.buf_ = np.empty_like(p)
        buf[...] = p
        return buf


class ReturnsList(Shrink):
    def predict_proba(self, logits, **kw):
        return super().predict_proba(logits, **kw).tolist()


class ReturnsTensor(Shrink):
    def predict_proba(self, logits, **kw):
        import torch

        return torch.from_numpy(super().predict_proba(logits, **kw))


class DropsColumn(Shrink):
    """K - 1 columns: the last class's probability dropped and the rest renormalised."""

    def predict_proba(self, logits, **kw):
        p = super().predict_proba(logits, **kw)[:, :-1]
        return p / p.sum(axis=1, keepdims=True)


class ExtraColumn(Shrink):
    """K + 1 columns: an empty class appended."""

    def predict_proba(self, logits, **kw):
        p = super().predict_proba(logits, **kw)
        return np.concatenate([p, np.zeros((p.shape[0], 1))], axis=1)


class RaisesInFit(Shrink):
    def _fit(self, z, y):
        raise RuntimeError("the solver diverged\n(details on a second line)")


class HangsInFit(Shrink):
    def _fit(self, z, y):
        time.sleep(3600)


_FACTS = dict(display="x", scale=1.0, decimals=3, interval=None, no_interval_reason="none",
              paired_test="sign_flip", reference="a test metric, 2026", verdicts=False)  # fmt: skip


@metric(name="wipes_probs", higher_is_better=False, **_FACTS)
def wipes_probs(p, y):
    """Mean top-label confidence, then every row overwritten with the uniform distribution."""
    value = float(p.max(axis=1).mean())
    p[...] = 1.0 / p.shape[1]
    return value


@metric(name="nan_metric", higher_is_better=False, **_FACTS)
def nan_metric(p, y):
    return float("nan")


@metric(name="list_metric", higher_is_better=False, **_FACTS)
def list_metric(p, y):
    return [0.5]


@metric(name="ece_backwards", higher_is_better=True, **_FACTS)
def ece_backwards(p, y):
    """Top-label ECE (an error: lower is better) declared higher-is-better."""
    from calbench.metrics import ece

    return ece(p, y)


@metric(name="hangs_metric", higher_is_better=False, **_FACTS)
def hangs_metric(p, y):
    time.sleep(3600)
    return 0.0


@metric(name="scribbles_labels", higher_is_better=False, **_FACTS)
def scribbles_labels(p, y):
    """Deliberately hostile: makes the job's labels writeable again and zeroes them."""
    base = y
    while isinstance(base.base, np.ndarray):
        base = base.base
    base.flags.writeable = True
    base[...] = 0
    return 0.5
