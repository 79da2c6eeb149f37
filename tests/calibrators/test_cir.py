"""Centered isotonic regression (Oron & Flournoy 2017): known answers and a rebuild from the
paper's definition on scikit-learn's isotonic fit (cir_model, the package probmetrics wraps, is
not a test dependency)."""

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from calbench.calibrators import get_calibrator
from calbench.calibrators.cir import fit_cir
from calbench.functional import softmax


def test_known_answer():
    # y = (1, 21, 41, 34)/100 at x = 1..4: IR pools the last two to 0.375 at mean x 3.5; CIR
    # interpolates 0.21 -> 0.375 between x = 2 and 3.5, so f(3) = 0.21 + 0.165 / 1.5 = 0.32
    px, py = fit_cir(np.array([1.0, 2, 3, 4]), np.array([0.01, 0.21, 0.41, 0.34]))
    np.testing.assert_allclose(px, [1, 2, 3.5, 4])
    np.testing.assert_allclose(
        np.interp([1, 2, 3, 4], px, py), [0.01, 0.21, 0.32, 0.375], atol=1e-15
    )


def test_flat_stretches_at_zero_and_one_are_kept():
    x = np.arange(8.0)
    t = np.array([0, 0, 0, 1, 0, 1, 1, 1.0])  # IR: 0 0 0 .5 .5 1 1 1
    px, py = fit_cir(x, t)
    np.testing.assert_allclose(px, [0, 2, 3.5, 5, 7])
    np.testing.assert_allclose(py, [0, 0, 0.5, 1, 1])


def _cir_by_definition(x, t, s):
    ir = IsotonicRegression().fit(x, t)
    xs = np.sort(x)
    f = ir.predict(xs)
    vals = np.unique(f)
    pts = []
    for i, v in enumerate(vals):
        blk = xs[f == v]
        if v in (0.0, 1.0):
            pts += [(blk[0], v), (blk[-1], v)]
        else:
            if i == 0:
                pts.append((blk[0], v))
            pts.append((blk.mean(), v))
            if i == len(vals) - 1:
                pts.append((blk[-1], v))
    pts = sorted(set(pts))
    return np.interp(s, [p[0] for p in pts], [p[1] for p in pts])


@pytest.mark.parametrize("k", [2, 4])
def test_equals_the_definition(k, problem):
    z, y = problem(1500, k, seed=k)
    zt, _ = problem(500, k, seed=k + 1)
    cal = get_calibrator("cir").fit(z, y)
    p, pt = softmax(z), softmax(zt)
    cols = [1] if k == 2 else range(k)
    f = np.stack([_cir_by_definition(p[:, j], (y == j).astype(float), pt[:, j]) for j in cols], 1)
    ref = (
        np.concatenate([1 - f, f], 1)
        if k == 2
        else np.maximum(f, 1e-30) / np.maximum(f, 1e-30).sum(1, keepdims=True)
    )
    # same points; the interpolation weights round differently: 1e-12
    np.testing.assert_allclose(cal.predict_proba(zt), ref, atol=1e-12)
