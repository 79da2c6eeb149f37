"""Binary Platt scaling (``platt``).

Platt 1999, "Probabilistic outputs for support vector machines and comparisons to regularized
likelihood methods" (Advances in Large Margin Classifiers), eq. 1: ``P(y=1 | f) = 1 / (1 +
exp(A f + B))``.  Here the score is the logit difference ``f = z_1 - z_0`` and we write
``p_1 = sigmoid(a f + b)`` (``a = -A``, ``b = -B``), fitted by maximum likelihood (minimum mean
binary cross-entropy) with Newton's method and a backtracking line search, in float64.

``smooth_targets=True`` uses Platt's prior-corrected targets (his eq. 3):
``t+ = (N+ + 1) / (N+ + 2)`` for positives and ``t- = 1 / (N- + 2)`` for negatives; the default
(False) uses hard 0/1 targets, i.e. plain logistic regression on the one feature.

Only two classes: for K > 2 use temperature/vector scaling (``ts``, ``vs``, ``vs_b``) or
``dirichlet``.  On linearly separable data the likelihood has no finite maximiser; the fit then
stops after ``max_iter`` Newton steps with large coefficients.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calbench.calibrators.base import Calibrator, Field, register


def _log1pexp(x: np.ndarray) -> np.ndarray:
    """``log(1 + exp(x))`` without overflow."""
    return np.logaddexp(0.0, x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` without overflow and with full relative precision in both tails."""
    return np.exp(-np.logaddexp(0.0, -x))


def platt_objective(a: float, b: float, f: np.ndarray, t: np.ndarray) -> float:
    """Mean cross-entropy of ``sigmoid(a f + b)`` against targets ``t`` in [0, 1]."""
    s = a * f + b
    # -[t log sig(s) + (1-t) log(1 - sig(s))] = log(1+e^s) - t s
    return float(np.mean(_log1pexp(s) - t * s))


def fit_platt(
    f: np.ndarray, t: np.ndarray, *, max_iter: int = 100, tol: float = 1e-12
) -> tuple[float, float]:
    """Newton's method for ``min_{a,b} mean(log(1+exp(a f + b)) - t (a f + b))`` (Platt 1999).

    ``f`` (N,) scores, ``t`` (N,) targets in [0, 1].  Starts from ``a = 0`` and ``b =
    logit(mean(t))``; stops when the gradient's max-norm falls below ``tol``.
    """
    f = np.asarray(f, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    tbar = float(np.clip(t.mean(), 1e-12, 1 - 1e-12))
    w = np.array([0.0, np.log(tbar / (1 - tbar))])
    x = np.stack([f, np.ones_like(f)], axis=1)
    loss = platt_objective(w[0], w[1], f, t)
    for _ in range(int(max_iter)):
        s = x @ w
        p = _sigmoid(s)
        grad = x.T @ (p - t) / f.size
        if np.max(np.abs(grad)) < tol:
            break
        h = (x * (p * (1 - p))[:, None]).T @ x / f.size
        try:
            step = np.linalg.solve(h + 1e-12 * np.eye(2), grad)
        except np.linalg.LinAlgError:
            step = grad
        lr = 1.0
        while lr > 1e-10:
            cand = w - lr * step
            new = platt_objective(cand[0], cand[1], f, t)
            if new <= loss:
                break
            lr *= 0.5
        else:
            break
        w, loss = cand, new
    return float(w[0]), float(w[1])


@register
class PlattScaling(Calibrator):
    """Platt scaling of the binary logit difference ``z_1 - z_0`` (Platt 1999, eq. 1)."""

    name = "platt"
    reference = "Platt 1999 (Platt scaling)"

    state_schema = {"coef": Field(), "intercept": Field()}

    @classmethod
    def _check_state(cls, state: dict[str, Any], k: int) -> str | None:
        return None if k == 2 else f"n_classes = {k}, but Platt scaling is binary (K = 2)"

    def __init__(self, *, smooth_targets: bool = False, max_iter: int = 100) -> None:
        if not isinstance(smooth_targets, bool):
            raise ValueError(f"smooth_targets must be True or False, got {smooth_targets!r}")
        if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
            raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}")
        super().__init__(smooth_targets=smooth_targets, max_iter=max_iter)
        self.coef_: float | None = None
        self.intercept_: float | None = None

    @staticmethod
    def _score(logits: np.ndarray) -> np.ndarray:
        if logits.shape[1] != 2:
            raise ValueError(
                f"platt is binary but logits have {logits.shape[1]} classes; "
                "for K > 2 use ts, vs, vs_b or dirichlet"
            )
        z = np.asarray(logits, dtype=np.float64)
        return z[:, 1] - z[:, 0]

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        f = self._score(logits)
        t = (labels == 1).astype(np.float64)
        if self._params["smooth_targets"]:
            n_pos = t.sum()
            n_neg = t.size - n_pos
            t = np.where(t == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
        self.coef_, self.intercept_ = fit_platt(f, t, max_iter=self._params["max_iter"])

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        s = self.coef_ * self._score(logits) + self.intercept_
        return np.stack([_sigmoid(-s), _sigmoid(s)], axis=1)

    def _get_state(self) -> dict[str, Any]:
        return {"coef": self.coef_, "intercept": self.intercept_}

    def is_injective(self) -> bool:
        """``sigmoid(a (z_1 - z_0) + b)`` is a strictly monotone function of ``p_1`` (whose
        log-odds is ``z_1 - z_0``) unless ``a = 0``."""
        super().is_injective()
        return self.coef_ != 0.0

    def _set_state(self, state: dict[str, Any]) -> None:
        self.coef_ = float(state["coef"])
        self.intercept_ = float(state["intercept"])
