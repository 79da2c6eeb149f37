"""Synthetic logits shared by the calibrator tests."""

import numpy as np
import pytest


def sample_labels(rng, probs):
    """One label per row drawn from the categorical distribution ``probs`` (N, K)."""
    cum = np.cumsum(probs, axis=1)
    u = rng.random((probs.shape[0], 1)) * cum[:, -1:]
    return np.minimum((u > cum).sum(axis=1), probs.shape[1] - 1)


def softmax64(z):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.fixture
def small_problem():
    """(logits float32 (300, 4), labels): informative but miscalibrated (overconfident)."""
    rng = np.random.default_rng(7)
    n, k = 300, 4
    z = rng.normal(size=(n, k)) * 2.0
    y = sample_labels(rng, softmax64(z / 2.5))
    return z.astype(np.float32), y
