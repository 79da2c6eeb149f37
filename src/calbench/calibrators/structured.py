"""Structured vector and matrix scaling (``svs``, ``sms``), and the temperature-scaling-with-
mixture step they start from.

Berta, Holzmüller, Jordan & Bach 2025, "Structured matrix scaling for multi-class calibration"
(arXiv:2511.03685; AISTATS 2026).  Both calibrators first temperature-scale the log-probabilities
``l = log softmax(z)`` and mix the result with the uniform distribution (the paper's "TS-mix",
sec. 4.1)::

    q = (1 - e) softmax(a* l) + e / K,      e = 1 / (n + 1),
    a* = argmin_a  mean_i [ logsumexp(a l_i) - a l_{i, y_i} ]          (Guo et al. 2017, sec. 4.2)

and then fit, on ``x = log q``, the structured map of the paper's eq. (3)::

    svs:  softmax( x * (1 + d) + b )
    sms:  softmax( x + x @ D^T + b )        D (K, K): diagonal and off-diagonal parts

minimising mean cross-entropy plus the ridge penalty of the paper's eq. (5)::

    lambda_b k^rho / n^tau ||b||^2 + lambda_d k^rho / n^tau ||diag||^2
        + lambda_o (k (k-1))^rho / n^tau ||offdiag||^2

(``rho = tau = 1`` and all lambdas 1 by default, as in ``probmetrics``).

Computation as in ``probmetrics`` (its ``SVSCalibrator``/``SMSCalibrator``, ``opt="bfgs"``):
the features ``x`` are ``log`` of ``q`` rounded to float32 and clipped below at
``log(tiny float32)`` (-87.34).  probmetrics also clips the log-probabilities ``l`` there (its
input is float32 probabilities); calbench, which has the logits, does not
(:func:`exact_log_probs`: the same numbers wherever no log-probability is below -87.34, and a
far better fit on logits as large as |z| = 1,000).  Where calbench differs it solves
the same objective more exactly: ``a*`` is the exact minimiser (safeguarded Newton on the convex
1-D objective; probmetrics bisects 30 times on ``log a`` in [-16, 16], within 3e-8 of it) and the
structured map is the exact minimiser of the strictly convex penalised objective (L-BFGS in
float64 to a gradient norm below 1e-10; probmetrics runs torchmin's BFGS in float32, which stops
at float32 resolution, so fitted probabilities agree to about 1e-4).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from calbench.calibrators.base import Calibrator, Field, register
from calbench.calibrators.fit_guard import describe, diverged, fail
from calbench.calibrators.fit_threads import SINGLE_THREAD_MAX_ENTRIES
from calbench.calibrators.precision import check_precision
from calbench.calibrators.scaling import softmax_affine_injective
from calbench.functional import (  # noqa: E402  (shared with metrics.refinement)
    LOG_TINY32,
    fit_inverse_temperature,
    log_softmax,
    softmax,
    ts_mix_probs,
)


def float32_log_features(q: np.ndarray) -> np.ndarray:
    """``max(log(float32(q)), log tiny32)``: probmetrics' ``multiclass_probs_to_logits``, computed
    in float32 and returned as float64."""
    with np.errstate(divide="ignore"):
        x = np.log(np.asarray(q, dtype=np.float32))
    return np.maximum(x, np.float32(LOG_TINY32)).astype(np.float64)


def exact_log_probs(logits) -> np.ndarray:
    """``log softmax(z)`` in float64, the input of the TS-mix step.

    probmetrics receives float32 probabilities, so its log-probabilities stop at
    ``log tiny32`` (-87.3): :func:`~calbench.functional.clipped_log_probs`.  calbench has the
    logits, and keeps the log-probabilities below that: on logits as large as |z| = 1,000 the
    clip merges most classes' log-probabilities into one value, and the TS-mix step (whose
    inverse temperature brings them back to the scale of a few units) then fits a far worse
    map (validation NLL 1.86 instead of 1.65 on a 10-class set, tests/calibrators/
    test_divergence.py).  Where no log-probability is below the clip (any logits whose range
    is under 87), the two are equal bit for bit, and so is everything fitted from them.
    """
    return log_softmax(np.asarray(logits, dtype=np.float64), axis=1)


def blas_threads(n_entries: int):
    """One BLAS thread for problems of at most ``SINGLE_THREAD_MAX_ENTRIES`` entries (as the
    torch fits of :mod:`calbench.calibrators.scaling`): their matrix products take milliseconds,
    and on a loaded machine several BLAS threads make them over 10x slower."""
    from threadpoolctl import threadpool_limits

    if n_entries <= SINGLE_THREAD_MAX_ENTRIES:
        return threadpool_limits(limits=1, user_api="blas")
    return contextlib.nullcontext()


def _minimise(fun_grad, x0: np.ndarray, name: str = "svs") -> np.ndarray:
    """L-BFGS-B from ``x0``; a result worse than ``x0`` (or non-finite) is a one-line error
    (divergence guard, :mod:`calbench.calibrators.fit_guard`; L-BFGS-B's line search makes it
    unreachable in exact arithmetic)."""
    from scipy.optimize import minimize

    res = minimize(
        fun_grad, x0, jac=True, method="L-BFGS-B",
        options={"maxiter": 20000, "maxcor": 30, "ftol": 0.0, "gtol": 1e-10},
    )  # fmt: skip
    start, fitted = fun_grad(x0)[0], fun_grad(res.x)[0]
    if diverged(fitted, start):
        note = describe(name, "L-BFGS-B", "objective", fitted, start, "its initial map")
        raise fail(note, fitted, "check the logits for extreme values")
    return np.asarray(res.x, dtype=np.float64)


def _ce_and_residual(s: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of ``softmax(s)`` and its gradient in ``s``, ``(softmax(s) - onehot) / n``
    (``s`` is overwritten)."""
    n = s.shape[0]
    rows = np.arange(n)
    s -= s.max(axis=1, keepdims=True)
    picked = s[rows, labels].copy()
    np.exp(s, out=s)
    tot = s.sum(axis=1)
    loss = float(np.mean(np.log(tot) - picked))
    s /= (tot * n)[:, None]
    s[rows, labels] -= 1.0 / n
    return loss, s


def fit_svs(
    x: np.ndarray, labels: np.ndarray, lam_b: float, lam_d: float
) -> tuple[np.ndarray, np.ndarray]:
    """Minimise ``mean CE(x (1 + d) + b) + lam_b ||b||^2 + lam_d ||d||^2``; returns ``(1 + d, b)``."""
    k = x.shape[1]

    def fun_grad(theta):
        d, b = theta[:k], theta[k:]
        loss, g = _ce_and_residual(x * (1.0 + d) + b, labels)
        loss += lam_b * b @ b + lam_d * d @ d
        grad = np.concatenate(
            [np.einsum("ij,ij->j", g, x) + 2 * lam_d * d, g.sum(0) + 2 * lam_b * b]
        )
        return loss, grad

    theta = _minimise(fun_grad, np.zeros(2 * k), "svs")
    return 1.0 + theta[:k], theta[k:]


def fit_sms(
    x: np.ndarray, labels: np.ndarray, lam_b: float, lam_d: float, lam_o: float
) -> tuple[np.ndarray, np.ndarray]:
    """Minimise ``mean CE(x + x D^T + b) + lam_b ||b||^2 + lam_d ||diag D||^2 + lam_o ||offdiag D||^2``;
    returns ``(I + D, b)``."""
    k = x.shape[1]
    pen = np.full((k, k), lam_o)
    np.fill_diagonal(pen, lam_d)
    eye = np.eye(k)

    def fun_grad(theta):
        dmat, b = theta[: k * k].reshape(k, k), theta[k * k :]
        loss, g = _ce_and_residual(x @ (eye + dmat).T + b, labels)
        loss += lam_b * b @ b + np.sum(pen * dmat * dmat)
        grad_d = g.T @ x + 2 * pen * dmat
        return loss, np.concatenate([grad_d.ravel(), g.sum(0) + 2 * lam_b * b])

    # start from the structured vector scaling optimum (same lam_b, lam_d; off-diagonal 0)
    v, b0 = fit_svs(x, labels, lam_b, lam_d)
    theta = _minimise(fun_grad, np.concatenate([np.diag(v - 1.0).ravel(), b0]), "sms")
    return eye + theta[: k * k].reshape(k, k), theta[k * k :]


def _check_positive(name: str, value) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not np.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


class _Structured(Calibrator):
    """Shared TS-mix front end of ``svs`` and ``sms`` (module docstring)."""

    def __init__(
        self,
        *,
        lambda_intercept: float = 1.0,
        lambda_diagonal: float = 1.0,
        rho: float = 1.0,
        tau: float = 1.0,
        precision: str = "float64",
        **extra: Any,
    ) -> None:
        for key, val in [("lambda_intercept", lambda_intercept), ("lambda_diagonal", lambda_diagonal),
                         ("rho", rho), ("tau", tau), *extra.items()]:  # fmt: skip
            _check_positive(key, val)
        super().__init__(
            lambda_intercept=float(lambda_intercept), lambda_diagonal=float(lambda_diagonal),
            rho=float(rho), tau=float(tau), precision=check_precision(precision),
            **{k: float(v) for k, v in extra.items()},
        )  # fmt: skip
        self.a_: float | None = None
        self.mix_: float | None = None

    def is_injective(self) -> bool:
        """A sufficient condition (exact arithmetic, the float32 rounding of the features
        aside): the TS-mix step ``q = (1 - e) softmax(a log p) + e / K`` is injective in ``p``
        for ``a > 0`` and ``e < 1``, and ``softmax(log q @ M + b)`` is injective in ``q`` when
        :func:`~calbench.calibrators.scaling.softmax_affine_injective` holds for
        log-probabilities (``M = diag(v)`` or ``W^T``); ``False`` otherwise (not shown)."""
        super().is_injective()
        return bool(self.a_ > 0 and self.mix_ < 1) and softmax_affine_injective(
            self.linear_part(), "log_probs"
        )

    def _features(self, logits: np.ndarray) -> np.ndarray:
        return float32_log_features(ts_mix_probs(exact_log_probs(logits), self.a_, self.mix_))

    def _penalties(self, n: int, k: int) -> tuple[float, float, float]:
        p = self._params
        scale = k ** p["rho"] / n ** p["tau"]
        lam_o = p.get("lambda_off_diagonal", 0.0) * (k * (k - 1)) ** p["rho"] / n ** p["tau"]
        return p["lambda_intercept"] * scale, p["lambda_diagonal"] * scale, lam_o

    def _fit(self, logits: np.ndarray, labels: np.ndarray) -> None:
        lp = exact_log_probs(logits)
        self.a_ = fit_inverse_temperature(lp, labels)
        self.mix_ = 1.0 / (labels.size + 1)
        x = float32_log_features(ts_mix_probs(lp, self.a_, self.mix_))
        with blas_threads(x.size):
            self._fit_map(x, labels, *self._penalties(*x.shape))

    def _out(self, s: np.ndarray) -> np.ndarray:
        p = softmax(s, axis=1)
        return (
            p.astype(np.float32) / p.astype(np.float32).sum(1, keepdims=True)
            if self._params["precision"] == "float32"
            else p
        )


@register
class StructuredVectorScaling(_Structured):
    """Structured vector scaling (Berta et al. 2025, eq. 3 with a diagonal matrix, eq. 5 penalty):
    TS-mix, then ``softmax(x * v + b)`` with ridge penalties on ``v - 1`` and ``b``."""

    name = "svs"
    reference = "Berta, Holzmueller, Jordan & Bach 2025 (structured vector scaling)"
    state_schema = {
        "a": Field(low=0.0, low_open=True, note="inverse temperature of the TS-mix step"),
        "mix": Field(low=0.0, high=1.0, note="uniform mixture weight 1/(n+1)"),
        "v": Field(shape=("K",)),
        "b": Field(shape=("K",)),
    }

    def _fit_map(self, x, labels, lam_b, lam_d, lam_o) -> None:
        self.v_, self.b_ = fit_svs(x, labels, lam_b, lam_d)

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        return self._out(self._features(logits) * self.v_ + self.b_)

    def linear_part(self) -> np.ndarray:
        """``diag(v)``: the fitted map is ``log q @ diag(v) + b``."""
        return np.diag(self.v_)

    def _get_state(self) -> dict[str, Any]:
        return {"a": self.a_, "mix": self.mix_, "v": self.v_, "b": self.b_}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.a_, self.mix_ = float(state["a"]), float(state["mix"])
        self.v_, self.b_ = np.asarray(state["v"], float), np.asarray(state["b"], float)


@register
class StructuredMatrixScaling(_Structured):
    """Structured matrix scaling (Berta et al. 2025, eqs. 3 and 5): TS-mix, then
    ``softmax(x @ W^T + b)`` with separate ridge penalties on ``diag(W) - 1``, the off-diagonal
    of ``W`` and ``b``."""

    name = "sms"
    reference = "Berta, Holzmueller, Jordan & Bach 2025 (structured matrix scaling)"
    state_schema = {
        "a": Field(low=0.0, low_open=True, note="inverse temperature of the TS-mix step"),
        "mix": Field(low=0.0, high=1.0, note="uniform mixture weight 1/(n+1)"),
        "W": Field(shape=("K", "K")),
        "b": Field(shape=("K",)),
    }

    def __init__(self, *, lambda_off_diagonal: float = 1.0, **kwargs: Any) -> None:
        super().__init__(lambda_off_diagonal=lambda_off_diagonal, **kwargs)

    def _fit_map(self, x, labels, lam_b, lam_d, lam_o) -> None:
        self.W_, self.b_ = fit_sms(x, labels, lam_b, lam_d, lam_o)

    def _predict_proba(self, logits: np.ndarray) -> np.ndarray:
        return self._out(self._features(logits) @ self.W_.T + self.b_)

    def linear_part(self) -> np.ndarray:
        """``W^T``: the fitted map is ``log q @ W^T + b``."""
        return self.W_.T

    def _get_state(self) -> dict[str, Any]:
        return {"a": self.a_, "mix": self.mix_, "W": self.W_, "b": self.b_}

    def _set_state(self, state: dict[str, Any]) -> None:
        self.a_, self.mix_ = float(state["a"]), float(state["mix"])
        self.W_, self.b_ = np.asarray(state["W"], float), np.asarray(state["b"], float)
