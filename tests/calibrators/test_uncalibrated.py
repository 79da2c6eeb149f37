"""The identity calibrator is the softmax."""

import numpy as np

from calbench.calibrators import get_calibrator
from conftest import softmax64


def test_uncalibrated_is_softmax():
    z = np.array([[0.0, 0.0], [1.0, 0.0], [1000.0, -1000.0]])
    p = get_calibrator("uncalibrated").fit(z, [0, 1, 0]).predict_proba(z)
    e = np.exp(1.0)
    np.testing.assert_allclose(p, [[0.5, 0.5], [e / (e + 1), 1 / (e + 1)], [1.0, 0.0]], atol=1e-15)
    rng = np.random.default_rng(0)
    z = rng.normal(size=(50, 7)).astype(np.float32)
    np.testing.assert_allclose(get_calibrator("uncalibrated").fit(z, np.arange(50) % 7).predict_proba(z),
                               softmax64(z), atol=1e-15)  # fmt: skip
