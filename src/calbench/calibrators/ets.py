"""Ensemble temperature scaling (``ets``).

Zhang, Kailkhura & Han 2020, "Mix-n-Match: Ensemble and compositional methods for uncertainty
calibration in deep learning" (ICML), sec. 3.1, "Ensemble temperature scaling", eq. (8): the
calibrated probabilities are a convex combination of the temperature-scaled, the uncalibrated
and the uniform distribution::

    p = w1 softmax(z / T) + w2 softmax(z) + w3 / K,      w1 + w2 + w3 = 1,  w >= 0.

As in the authors' released code, ``T`` is fitted first, alone (``softmax(z / T)`` against the
one-hot labels, ``T`` in [0.05, 5]), then the weights with ``T`` fixed, both for the same loss:
``loss="mse"`` (their default; mean over samples and classes of the squared difference to the
one-hot label) or ``loss="nll"`` (mean negative log-likelihood).

Solved exactly: ``T`` by bounded Brent minimisation of the 1-D loss (tolerance 1e-10 on ``T``);
for ``mse`` the weights are the exact minimiser of a 3-variable convex quadratic on the simplex
(every face of the simplex is tried in closed form and the best feasible point kept), for
``nll`` the minimiser of the convex log-likelihood by SLSQP (tolerance 1e-12).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np

from calbench._checks import check_choice
from calbench.calibrators.base import Calibrator, Field, register
from calbench.calibrators.fit_guard import describe, diverged, fail, warn_refit
from calbench.calibrators.precision import check_precision
from calbench.functional import softmax

LOSSES = ("mse", "nll")
T_BOUNDS = (0.05, 5.0)


def _loss(p: np.ndarray, labels: np.ndarray, loss: str) -> float:
    n = labels.size
    if loss == "nll":
        return float(-np.mean(np.log(p[np.arange(n), labels] + 1e-12)))
    sq = np.einsum("ij,ij->", p, p) - 2.0 * p[np.arange(n), labels].sum() + n
    return float(sq / p.size)


def fit_temperature(logits: np.ndarray, labels: np.ndarray, loss: str) -> float:
    """``argmin_T loss(softmax(z / T))`` on ``T_BOUNDS`` (bounded Brent)."""
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(
        lambda t: _loss(softmax(logits / t), labels, loss), bounds=T_BOUNDS, method="bounded",
        options={"xatol": 1e-10},
    )  # fmt: skip
    return float(res.x)


def simplex_qp(g: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Exact minimiser of ``w' G w - 2 c' w`` over the probability simplex (small ``G``)."""
    d = c.size
    best, best_val = None, np.inf
    for size in range(1, d + 1):
        for face in combinations(range(d), size):
            idx = list(face)
            # minimise on the affine hull of the face: KKT system with one equality constraint
            a = np.zeros((size + 1, size + 1))
            a[:size, :size] = 2.0 * g[np.ix_(idx, idx)]
            a[:size, size] = 1.0
            a[size, :size] = 1.0
            rhs = np.r_[2.0 * c[idx], 1.0]
            try:
                sol = np.linalg.lstsq(a, rhs, rcond=None)[0][:size]
            except np.linalg.LinAlgError:
                continue
            if np.any(sol < -1e-12):
                continue
            w = np.zeros(d)
            w[idx] = np.clip(sol, 0.0, None)
            w /= w.sum()
            val = w @ g @ w - 2.0 * c @ w
            if val < best_val - 1e-15:
                best, best_val = w, val
    return best


def fit_weights(parts: list[np.ndarray], labels: np.ndarray, loss: str) -> np.ndarray:
    """Simplex weights of the mixture of ``parts`` (each (N, K)) minimising ``loss``."""
    n = labels.size
    rows = np.arange(n)
    if loss == "mse":
        g = np.array([[np.einsum("ij,ij->", a, b) for b in parts] for a in parts])
        c = np.array([a[rows, labels].sum() for a in parts])
        return simplex_qp(g, c)
    from scipy.optimize import minimize

    py = np.stack([a[rows, labels] for a in parts], axis=1)

    def fun(w):
        q = py @ w + 1e-12
        return -np.mean(np.log(q)), -(py / q[:, None]).mean(0)

    res = minimize(
        fun, np.array([1.0, 0.0, 0.0]), jac=True, method="SLSQP", bounds=[(0.0, 1.0)] * 3,
        constraints={"type": "eq", "fun": lambda w: w.sum() - 1.0}, tol=1e-12,
    )  # fmt: skip
    w = np.clip(res.x, 0.0, None)
    return w / w.sum()


@register
class EnsembleTemperatureScaling(Calibrator):
    """Ensemble temperature scaling (Zhang, Kailkhura & Han 2020, eq. 8)."""

    name = "ets"
    reference = "Zhang, Kailkhura & Han 2020 (ensemble temperature scaling)"
    state_schema = {
        "temperature": Field(low=T_BOUNDS[0], high=T_BOUNDS[1]),
        "weights": Field(
            shape=(3,), low=0.0, high=1.0, note="weights of TS, uncalibrated, uniform"
        ),
    }

    @classmethod
    def _check_state(cls, state: dict[str, Any], k: int) -> str | None:
        s = float(np.sum(state["weights"]))
        return None if abs(s - 1.0) <= 1e-9 else f"weights sum to {s:g}, not 1"

    def __init__(self, *, loss: str = "mse", precision: str = "float64") -> None:
        check_choice(loss, "loss", LOSSES)
        super().__init__(loss=loss, precision=check_precision(precision))
        self.temperature_: float | None = None
        self.weights_: np.ndarray | None = None
        #: what the divergence guard reported (:mod:`calbench.calibrators.fit_guard`), else None
        self.fit_note_: str | None = None

    def _parts(self, z: np.ndarray, t: float) -> list[np.ndarray]:
        z = np.asarray(z, dtype=np.float64)
        k = z.shape[1]
        return [softmax(z / t), softmax(z), np.full(z.shape, 1.0 / k)]

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        loss = self._params["loss"]
        z = np.asarray(logits, dtype=np.float64)
        self.fit_note_ = None
        self.temperature_ = fit_temperature(z, labels, loss)
        self.weights_ = fit_weights(self._parts(z, self.temperature_), labels, loss)
        self._guard(z, labels, loss)

    def _mixture_loss(self, z, labels, loss: str, t: float, w) -> float:
        p = self._parts(z, t)
        return _loss(w[0] * p[0] + w[1] * p[1] + w[2] * p[2], labels, loss)

    def _guard(self, z: np.ndarray, labels: np.ndarray, loss: str) -> None:
        """Divergence guard (:mod:`calbench.calibrators.fit_guard`): the fit must not end above
        its start (``T = 1``, weights ``(1, 0, 0)``: plain temperature scaling at T = 1), and a
        temperature held at an end of :data:`T_BOUNDS` while the loss still falls beyond it is
        reported (:class:`~calbench.calibrators.fit_guard.FitGuardWarning`): Zhang et al.'s range
        assumes logits of the usual size, and on larger ones ets is left far from its optimum."""
        start = self._mixture_loss(z, labels, loss, 1.0, np.array([1.0, 0.0, 0.0]))
        fitted = self._mixture_loss(z, labels, loss, self.temperature_, self.weights_)
        if diverged(fitted, start):  # unreachable: T = 1 and (1, 0, 0) are feasible
            note = describe("ets", "the bounded fit", loss.upper(), fitted, start, "T=1")
            raise fail(note, fitted, "check the logits for extreme values")
        t = self.temperature_
        for bound, beyond, size in (
            (T_BOUNDS[0], T_BOUNDS[0] / 1.01, "small"),
            (T_BOUNDS[1], T_BOUNDS[1] * 1.01, "large"),
        ):
            if abs(t - bound) > 1e-6 * bound:
                continue
            here = _loss(softmax(z / t), labels, loss)
            there = _loss(softmax(z / beyond), labels, loss)
            if there < here:
                self.fit_note_ = (
                    f"ets: the temperature stopped at the bound T={bound:g} of Zhang et al.'s "
                    f"search range {T_BOUNDS} while the {loss.upper()} still falls beyond it "
                    f"({here:.4g} at T={bound:g}, {there:.4g} at T={beyond:.4g}): the logits are "
                    f"too {size} for that range (or uninformative); ts fits the temperature "
                    "without a bound"
                )
                warn_refit(self.fit_note_)

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        p0, p1, p2 = self._parts(logits, self.temperature_)
        w = self.weights_
        out = w[0] * p0 + w[1] * p1 + w[2] * p2
        return out.astype(np.float32) if self._params["precision"] == "float32" else out

    def _get_state(self) -> dict[str, Any]:
        return {"temperature": self.temperature_, "weights": self.weights_}

    def is_injective(self) -> bool:
        """Injective in the model's probabilities when the temperature-scaled and the
        uncalibrated parts have some weight (``w1 + w2 > 0``): ``w1 softmax(z / T) +
        w2 softmax(z)`` is the gradient of ``w1 T LSE(z / T) + w2 LSE(z)``, strictly convex across
        ``span(1)``, and the gradient of a strictly convex function is injective (monotone:
        ``(g(a) - g(b)) . (a - b) > 0``); the uniform part only adds a constant."""
        super().is_injective()
        return bool(self.weights_[0] + self.weights_[1] > 0)

    def _set_state(self, state: dict[str, Any]) -> None:
        self.temperature_ = float(state["temperature"])
        self.weights_ = np.asarray(state["weights"], dtype=np.float64)
