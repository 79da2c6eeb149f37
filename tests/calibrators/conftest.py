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


def make_problem(n, k, seed=0, scale=3.0, temperature=2.0):
    """(logits float64 (n, k), labels): over-confident logits (labels drawn at ``temperature``)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * scale
    return z, sample_labels(rng, softmax64(z / temperature))


@pytest.fixture
def problem():
    """:func:`make_problem`, for tests that need several sizes."""
    return make_problem


@pytest.fixture
def probmetrics_calibrators():
    """``probmetrics.calibrators`` (skipped if not installed).  probmetrics imports numba at
    module level for its SAGA solver without declaring it; the tests use its BFGS path only, so a
    stand-in ``numba.njit`` (identity decorator) is installed when numba is absent."""
    import sys
    import types

    pytest.importorskip("probmetrics")
    try:
        import numba  # noqa: F401
    except ImportError:
        stub = types.ModuleType("numba")
        stub.njit = lambda *a, **k: a[0] if a and callable(a[0]) else (lambda f: f)
        sys.modules["numba"] = stub
    import probmetrics.calibrators as pc

    return pc
