"""Small numerically stable array functions shared across the package."""

from __future__ import annotations

import numpy as np

from calbench._checks import check_logits


def _shifted64(logits, axis: int) -> np.ndarray:
    """``z - max(z)`` in float64 as a new array (one full-size allocation; never the input)."""
    arr = check_logits(logits)
    if arr.dtype == np.float64:
        return arr - arr.max(axis=axis, keepdims=True)
    z = arr.astype(np.float64)  # already a new array: shift it in place
    z -= z.max(axis=axis, keepdims=True)
    return z


def softmax(logits, axis: int = -1) -> np.ndarray:
    """Row-wise softmax of ``logits`` (N, K), computed in float64 after max subtraction."""
    z = _shifted64(logits, axis)
    np.exp(z, out=z)
    z /= z.sum(axis=axis, keepdims=True)
    return z


def log_softmax(logits, axis: int = -1) -> np.ndarray:
    """Row-wise log-softmax of ``logits`` (N, K) in float64."""
    z = _shifted64(logits, axis)
    lse = np.log(np.exp(z).sum(axis=axis, keepdims=True))
    z -= lse
    return z


# --- temperature scaling with a uniform mixture (calibrators.structured, metrics.refinement) ---
#: ``log(finfo(float32).tiny)``: probmetrics' lower clip of log-probabilities.
LOG_TINY32 = float(np.log(np.finfo(np.float32).tiny))
#: Bracket of the inverse temperature (probmetrics bisects ``log a`` in [-16, 16]).
A_MIN, A_MAX = float(np.exp(-16.0)), float(np.exp(16.0))


def clipped_log_probs(logits) -> np.ndarray:
    """``max(log softmax(z), log tiny32)`` in float64."""
    return np.maximum(log_softmax(np.asarray(logits, dtype=np.float64), axis=1), LOG_TINY32)


def _ts_grad_hess(
    a: float, lp: np.ndarray, ly: np.ndarray, lp2: np.ndarray | None = None
) -> tuple[float, float]:
    """Gradient and Hessian in ``a`` of the TS objective at ``a`` (``lp`` finite float64,
    ``lp2 = lp * lp`` when the caller has it): :func:`softmax`'s arithmetic on ``a * lp``
    without its input check, in place."""
    p = a * lp
    if p.dtype != np.float64:
        p = p.astype(np.float64)
    p -= p.max(axis=1, keepdims=True)
    np.exp(p, out=p)
    p /= p.sum(axis=1, keepdims=True)
    m1 = np.einsum("ij,ij->i", p, lp)
    m2 = np.einsum("ij,ij->i", p, lp * lp if lp2 is None else lp2)
    return float(np.mean(m1) - np.mean(ly)), float(np.mean(m2 - m1 * m1))


def fit_inverse_temperature(lp: np.ndarray, labels: np.ndarray, tol: float = 1e-13) -> float:
    """Exact minimiser in ``[e^-16, e^16]`` of ``mean(logsumexp(a lp) - a lp_y)`` (convex in a).

    Safeguarded Newton: Newton steps inside a shrinking bracket on the sign of the derivative,
    bisection when a step leaves it; stops when the bracket or the step is below ``tol`` relative.
    """
    lp = check_logits(lp, "log-probabilities")  # checked once, not at every step
    ly = lp[np.arange(lp.shape[0]), labels]
    lp2 = lp * lp
    lo, hi = A_MIN, A_MAX
    if _ts_grad_hess(lo, lp, ly, lp2)[0] >= 0:
        return lo
    if _ts_grad_hess(hi, lp, ly, lp2)[0] <= 0:
        return hi
    a = 1.0
    for _ in range(200):
        g, h = _ts_grad_hess(a, lp, ly, lp2)
        if g > 0:
            hi = a
        else:
            lo = a
        step = a - g / h if h > 0 else np.inf
        new = step if lo < step < hi else 0.5 * (lo + hi)
        if abs(new - a) <= tol * a or (hi - lo) <= tol * a:
            return float(new)
        a = new
    return float(a)


def ts_mix_probs(lp: np.ndarray, a: float, mix: float) -> np.ndarray:
    """``(1 - mix) softmax(a lp) + mix / K`` (TS followed by the uniform mixture)."""
    k = lp.shape[1]
    return (1.0 - mix) * softmax(a * lp, axis=1) + mix / k
