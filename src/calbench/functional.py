"""Small numerically stable array functions shared across the package."""

from __future__ import annotations

import numpy as np

from calbench._checks import check_logits


def softmax(logits, axis: int = -1) -> np.ndarray:
    """Row-wise softmax of ``logits`` (N, K), computed in float64 after max subtraction."""
    z = np.asarray(check_logits(logits), dtype=np.float64)
    z = z - z.max(axis=axis, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=axis, keepdims=True)
    return z


def log_softmax(logits, axis: int = -1) -> np.ndarray:
    """Row-wise log-softmax of ``logits`` (N, K) in float64."""
    z = np.asarray(check_logits(logits), dtype=np.float64)
    z = z - z.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))
