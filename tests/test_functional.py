"""calbench.functional: softmax and log-softmax equal the plain numpy formulas bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from calbench.functional import log_softmax, softmax


def plain_softmax(z, axis=-1):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def plain_log_softmax(z, axis=-1):
    z = np.asarray(z, dtype=np.float64)
    s = z - z.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_softmax_and_log_softmax_equal_the_plain_formulas_and_keep_the_input(dtype):
    rng = np.random.default_rng(3)
    if dtype == np.int64:
        z = rng.integers(-50, 50, (1031, 257))
    else:
        z = rng.normal(0, 20, (1031, 257)).astype(dtype)
    z[0] = 0
    z[1, 3] = 700 if dtype != np.float32 else 80  # one dominant class
    keep = z.copy()
    np.testing.assert_array_equal(softmax(z), plain_softmax(z))
    np.testing.assert_array_equal(log_softmax(z), plain_log_softmax(z))
    np.testing.assert_array_equal(z, keep)
    assert softmax(z).dtype == log_softmax(z).dtype == np.float64


def test_softmax_axis_0():
    z = np.random.default_rng(0).normal(size=(5, 4))
    np.testing.assert_array_equal(softmax(z, axis=0), plain_softmax(z, axis=0))
    np.testing.assert_array_equal(log_softmax(z, axis=0), plain_log_softmax(z, axis=0))
