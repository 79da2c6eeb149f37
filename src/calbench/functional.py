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
