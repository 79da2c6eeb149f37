"""Centered isotonic regression (``cir``), binary and one-vs-rest.

Oron & Flournoy 2017, "Centered isotonic regression: point and interval estimation for
dose-response studies" (Statistics in Biopharmaceutical Research 9(3)), sec. 2.2 (the CIR
algorithm): fit isotonic regression by pool-adjacent-violators, then replace every flat stretch
(PAV block) by a single point at the weighted mean of its scores, with the block's value, and
interpolate linearly between these points.  The fit is then strictly increasing where the data
allow, instead of isotonic regression's steps.  As in the paper, stretches at value 0 or 1 are
not collapsed (their first and last score are kept), and the fitted range is kept: the first
block also keeps its lowest score and the last block its highest.  Predictions are constant
outside the fitted range (the scores are clipped to it, as ``probmetrics``' CIR calibrator does).

Scores are softmax probabilities: for K = 2 class 1's (output ``[1 - f, f]``), for K > 2 each
class's column against ``y == j``, then the rows are floored at 1e-30 and renormalised (the
reduction of ``probmetrics``' ``"cir"`` calibrator, ``MulticlassOneVsRestCalibrator``).  Equal
scores are pooled exactly (scikit-learn, which ``cir_model`` builds on, also pools scores closer
than 1e-15).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calbench.calibrators.base import Calibrator, Field, register
from calbench.calibrators.isotonic import knots_out_of_order
from calbench.calibrators.precision import check_precision
from calbench.functional import softmax


def fit_cir(x: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CIR interpolation points ``(px, py)`` (increasing ``px``) for scores ``x`` and targets
    ``t`` in [0, 1] (module docstring)."""
    from scipy.optimize import isotonic_regression

    order = np.argsort(x, kind="stable")
    xs = np.asarray(x, dtype=np.float64)[order]
    ts = np.asarray(t, dtype=np.float64)[order]
    ux, start, cnt = np.unique(xs, return_index=True, return_counts=True)
    means = np.add.reduceat(ts, start) / cnt
    fitted = np.asarray(isotonic_regression(means, weights=cnt.astype(float)).x)
    new = np.r_[True, fitted[1:] != fitted[:-1]]
    bstart = np.flatnonzero(new)
    bend = np.r_[bstart[1:], ux.size] - 1
    wsum = np.add.reduceat(cnt.astype(float), bstart)
    xmean = np.add.reduceat(ux * cnt, bstart) / wsum
    val = fitted[bstart]
    px: list[float] = []
    py: list[float] = []
    last = len(bstart) - 1
    for i, (a, b, m, v) in enumerate(zip(bstart, bend, xmean, val, strict=True)):
        if v in (0.0, 1.0):
            pts = [ux[a], ux[b]]
        elif i == 0 and i == last:
            pts = [ux[a], m, ux[b]]
        elif i == 0:
            pts = [ux[a], m]
        elif i == last:
            pts = [m, ux[b]]
        else:
            pts = [m]
        for p in pts:
            if not px or p > px[-1]:
                px.append(float(p))
                py.append(float(v))
    return np.asarray(px), np.asarray(py)


@register
class CenteredIsotonic(Calibrator):
    """Centered isotonic regression (Oron & Flournoy 2017), binary or one-vs-rest.

    State: the interpolation points of each binary problem concatenated (``knots_x``,
    ``knots_y``), split by ``offsets`` (one problem for K = 2, K otherwise).
    """

    name = "cir"
    reference = "Oron & Flournoy 2017 (centered isotonic regression)"
    state_schema = {
        "knots_x": Field(shape=(None,), low=0.0, high=1.0),
        "knots_y": Field(shape=(None,), low=0.0, high=1.0),
        "offsets": Field(shape=(None,), integer=True, low=0.0),
    }

    @classmethod
    def _check_state(cls, state: dict[str, Any], k: int) -> str | None:
        off, n = np.asarray(state["offsets"]), len(state["knots_x"])
        problems = 1 if k == 2 else k
        if len(state["knots_y"]) != n:
            return f"knots_x has {n} entries but knots_y {len(state['knots_y'])}"
        if off.size != problems + 1 or off[0] != 0 or off[-1] != n or np.any(np.diff(off) < 1):
            return f"offsets must hold {problems + 1} values rising from 0 to len(knots_x) = {n}"
        return knots_out_of_order(state["knots_x"], state["knots_y"], off)

    def __init__(self, *, precision: str = "float64") -> None:
        super().__init__(precision=check_precision(precision))
        self.knots_x_ = self.knots_y_ = self.offsets_ = None

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        p = softmax(logits)
        cols = [1] if p.shape[1] == 2 else range(p.shape[1])
        xs, ys, off = [], [], [0]
        for j in cols:
            px, py = fit_cir(p[:, j], labels == j)
            xs.append(px)
            ys.append(py)
            off.append(off[-1] + px.size)
        self.knots_x_, self.knots_y_ = np.concatenate(xs), np.concatenate(ys)
        self.offsets_ = np.asarray(off, dtype=np.int64)

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        p = softmax(logits)
        cols = [1] if p.shape[1] == 2 else range(p.shape[1])
        f = np.stack([
            np.interp(p[:, j], self.knots_x_[a:b], self.knots_y_[a:b])
            for j, a, b in zip(cols, self.offsets_[:-1], self.offsets_[1:], strict=True)
        ], axis=1)  # fmt: skip
        if p.shape[1] == 2:
            out = np.concatenate([1.0 - f, f], axis=1)
        else:
            f = np.maximum(f, 1e-30)
            out = f / f.sum(axis=1, keepdims=True)
        return out.astype(np.float32) if self._params["precision"] == "float32" else out

    def _get_state(self) -> dict[str, Any]:
        return {"knots_x": self.knots_x_, "knots_y": self.knots_y_, "offsets": self.offsets_}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.knots_x_ = np.asarray(state["knots_x"], dtype=np.float64)
        self.knots_y_ = np.asarray(state["knots_y"], dtype=np.float64)
        self.offsets_ = np.asarray(state["offsets"], dtype=np.int64)
