"""Beta calibration (``beta``), binary and one-vs-rest.

Kull, Silva Filho & Flach 2017, "Beta calibration: a well-founded and easily implemented
improvement on logistic calibration for binary classifiers" (AISTATS), eq. (3) and sec. 3.2:
the calibration map of a score ``s`` in (0, 1) is

    mu(s; a, b, c) = 1 / (1 + 1 / (exp(c) s^a / (1 - s)^b)),

i.e. a logistic regression on the two features ``ln s`` and ``-ln(1 - s)``, fitted by maximum
likelihood.  The three-parameter ("abm") fit of the paper's sec. 3.2 keeps the map monotone:
when the fitted ``a`` is negative the model is refitted with ``ln s`` dropped (``a = 0``), when
``b`` is negative with ``-ln(1 - s)`` dropped (``b = 0``), and when that refit's coefficient is
negative too, with both dropped (the intercept alone: the constrained maximum of the concave
likelihood).  Scores are clipped to
``[eps, 1 - eps]`` (``eps`` the float64 machine epsilon) before the logarithms.

Here the score is the softmax probability: for ``K = 2`` that of class 1 (output
``[1 - mu, mu]``); for ``K > 2`` each class's column is calibrated one-vs-rest and the rows are
renormalised (Kull et al. 2017, sec. 5, use the same reduction for multiclass data).  The
maximum-likelihood fit is Newton's method in float64 to a gradient max-norm of 1e-12 (the
reference ``betacal`` uses scikit-learn's L-BFGS with ``C = 1e11``, an almost-zero L2 penalty).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calbench.calibrators.base import Calibrator, Field, register
from calbench.calibrators.binning import renormalise_rows
from calbench.calibrators.precision import check_precision
from calbench.functional import softmax

EPS = float(np.finfo(np.float64).eps)


def _log1pexp(x):
    return np.logaddexp(0.0, x)


def _sigmoid(x):
    return np.exp(-np.logaddexp(0.0, -x))


def fit_logistic(
    x: np.ndarray, t: np.ndarray, *, max_iter: int = 200, tol: float = 1e-12
) -> np.ndarray:
    """Maximum-likelihood logistic regression ``P(t=1) = sigmoid(x @ w)`` by Newton's method with
    backtracking (``x`` (N, d) includes the intercept column).  Starts from ``w = 0``."""
    n, d = x.shape
    w = np.zeros(d)

    def loss(w):
        s = x @ w
        return float(np.mean(_log1pexp(s) - t * s))

    cur = loss(w)
    for _ in range(max_iter):
        p = _sigmoid(x @ w)
        grad = x.T @ (p - t) / n
        if np.max(np.abs(grad)) < tol:
            break
        h = (x * (p * (1 - p))[:, None]).T @ x / n
        try:
            step = np.linalg.solve(h + 1e-14 * np.eye(d), grad)
        except np.linalg.LinAlgError:
            step = grad
        lr = 1.0
        while lr > 1e-12:
            cand = w - lr * step
            new = loss(cand)
            if new <= cur:
                break
            lr *= 0.5
        else:
            break
        w, cur = cand, new
    return w


def beta_features(s: np.ndarray) -> np.ndarray:
    """``[ln s, -ln(1 - s)]`` of scores clipped to ``[eps, 1 - eps]`` (N, 2)."""
    s = np.clip(np.asarray(s, dtype=np.float64), EPS, 1 - EPS)
    return np.stack([np.log(s), -np.log1p(-s)], axis=1)


def fit_beta(s: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``(a, b, c)`` of the three-parameter beta map (module docstring, monotone refits)."""
    f = beta_features(s)
    ones = np.ones((f.shape[0], 1))
    t = np.asarray(t, dtype=np.float64)
    a, b, c = fit_logistic(np.hstack([f, ones]), t)
    if a < 0:
        b, c = fit_logistic(np.hstack([f[:, 1:], ones]), t)
        a = 0.0
    elif b < 0:
        a, c = fit_logistic(np.hstack([f[:, :1], ones]), t)
        b = 0.0
    if a < 0 or b < 0:
        # the one-feature refit is decreasing too (scores that carry no information, e.g. a
        # model predicting one class): the likelihood is concave, so its maximum over a, b >= 0
        # is at a = b = 0, the constant map at the class's base rate
        (c,) = fit_logistic(ones, t)
        a = b = 0.0
    return np.array([a, b, c], dtype=np.float64)


def apply_beta(coef: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``mu(s; a, b, c)`` (Kull et al. 2017, eq. 3)."""
    f = beta_features(s)
    return _sigmoid(coef[0] * f[:, 0] + coef[1] * f[:, 1] + coef[2])


@register
class BetaCalibration(Calibrator):
    """Beta calibration (Kull et al. 2017, eq. 3; binary, one-vs-rest for K > 2).

    State ``coef``: one row ``(a, b, c)`` for K = 2 (class 1's map), K rows for K > 2.
    """

    name = "beta"
    reference = "Kull, Silva Filho & Flach 2017, eq. 3 (beta calibration)"
    state_schema = {"coef": Field(shape=(None, 3))}

    @classmethod
    def _check_state(cls, state: dict[str, Any], k: int) -> str | None:
        rows = len(state["coef"])
        want = 1 if k == 2 else k
        if rows != want:
            return f"coef has {rows} rows, expected {want} for K={k}"
        if np.any(np.asarray(state["coef"])[:, :2] < 0):
            return "coef a and b must be >= 0 (monotone map)"
        return None

    def __init__(self, *, precision: str = "float64") -> None:
        super().__init__(precision=check_precision(precision))
        self.coef_: np.ndarray | None = None

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        p = softmax(logits)
        k = p.shape[1]
        if k == 2:
            self.coef_ = fit_beta(p[:, 1], labels == 1)[None, :]
        else:
            self.coef_ = np.stack([fit_beta(p[:, j], labels == j) for j in range(k)])

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        p = softmax(logits)
        if p.shape[1] == 2:
            q = apply_beta(self.coef_[0], p[:, 1])
            out = np.stack([1.0 - q, q], axis=1)
        else:
            out = renormalise_rows(
                np.stack([apply_beta(c, p[:, j]) for j, c in enumerate(self.coef_)], axis=1)
            )
        return out.astype(np.float32) if self._params["precision"] == "float32" else out

    def _get_state(self) -> dict[str, Any]:
        return {"coef": self.coef_}

    def is_injective(self) -> bool:
        """For two classes, ``mu(s)`` has derivative ``mu (1 - mu) (a / s + b / (1 - s))``: strictly
        monotone, hence injective, iff ``a b >= 0`` and not ``a = b = 0``. For ``K > 2`` the
        renormalised one-vs-rest maps are not known to be injective (``False``)."""
        super().is_injective()
        if self.n_classes_ != 2:
            return False
        a, b = float(self.coef_[0][0]), float(self.coef_[0][1])
        return a * b >= 0.0 and (a != 0.0 or b != 0.0)

    def _set_state(self, state: dict[str, Any]) -> None:
        self.coef_ = np.asarray(state["coef"], dtype=np.float64)
