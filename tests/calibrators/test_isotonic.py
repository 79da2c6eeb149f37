"""One-vs-rest isotonic regression equals scikit-learn's per-class IsotonicRegression."""

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from calbench.calibrators.isotonic import (
    IsotonicCalibration,
    apply_isotonic,
    fit_isotonic,
    isotonic_fit_1d,
    pool_ties,
)
from conftest import sample_labels, softmax64


def sklearn_ovr(p_fit, y, p_eval):
    out = np.empty_like(p_eval)
    for j in range(p_fit.shape[1]):
        ir = IsotonicRegression(increasing=True, out_of_bounds="clip", y_min=0, y_max=1)
        ir.fit(p_fit[:, j], (y == j).astype(np.float64))
        out[:, j] = ir.predict(p_eval[:, j])
    return out


@pytest.mark.parametrize("seed,n,k,decimals", [(0, 400, 5, 1), (1, 1500, 12, None), (2, 300, 3, 0)])
def test_equals_sklearn_with_ties_and_out_of_range_points(seed, n, k, decimals):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2
    z[np.arange(n), rng.integers(0, k, n)] += 2
    if decimals is not None:
        z = np.round(z, decimals)  # many tied scores (and tied positives/negatives)
    y = sample_labels(rng, softmax64(z / 1.5))
    p = softmax64(z)
    kx, ky, ko = fit_isotonic(p, y)
    p_new = softmax64(rng.normal(size=(500, k)) * 5)  # reaches outside the fitted range
    for q in (p, p_new):
        np.testing.assert_allclose(
            apply_isotonic(kx, ky, ko, q), sklearn_ovr(p, y, q), rtol=0, atol=1e-12
        )
    got = IsotonicCalibration().fit(z, y).predict_proba(z)
    ref = sklearn_ovr(p, y, p)
    np.testing.assert_allclose(got, ref / ref.sum(1, keepdims=True), rtol=0, atol=1e-12)


def test_near_ties_pooled_like_sklearn():
    # scores closer than 1e-15 are pooled left to right, including chains and tiny probabilities
    x = np.array([0.1, 0.1 + 3e-16, 0.1 + 7e-16, 0.1 + 1.2e-15, 0.2, 0.2 + 5e-16, 0.3, 0.3, 0.5,
                  1e-17, 2e-17, 5e-16, 1.1e-15, 0.6])  # fmt: skip
    y = np.array([1, 0, 1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 1, 0])
    p = np.stack([1 - x, x], 1)
    kx, ky, ko = fit_isotonic(p, y)
    q = np.sort(np.concatenate([x, x + 1e-16, x - 4e-16, [0.0, 1.0, 0.35, 0.55]]))
    q = np.clip(q, 0, 1)
    pq = np.stack([1 - q, q], 1)
    np.testing.assert_allclose(apply_isotonic(kx, ky, ko, pq), sklearn_ovr(p, y, pq), atol=1e-12)


def test_pool_ties_by_hand():
    ux, uy, w = pool_ties(np.array([0.1, 0.1, 0.2, 0.2 + 6e-16, 0.2 + 1.1e-15, 0.5]),
                          np.array([1, 0, 1, 1, 0, 0]))  # fmt: skip
    np.testing.assert_array_equal(ux, [0.1, 0.2, 0.2 + 1.1e-15, 0.5])
    np.testing.assert_array_equal(uy, [0.5, 1.0, 0.0, 0.0])
    np.testing.assert_array_equal(w, [2, 2, 1, 1])


def test_pav_by_hand():
    # y = 1 0 1 1 0 at increasing x: PAV pools (1, 0) -> 0.5 and (1, 1, 0) -> 2/3
    x, v = isotonic_fit_1d(np.array([0.1, 0.2, 0.3, 0.4, 0.5]), np.array([1, 0, 1, 1, 0]))
    np.testing.assert_allclose(
        x, [0.1, 0.2, 0.3, 0.5]
    )  # interior duplicate value 2/3 at 0.4 trimmed
    np.testing.assert_allclose(v, [0.5, 0.5, 2 / 3, 2 / 3])


def test_class_without_positives_maps_to_zero_and_rows_renormalise():
    z = np.array([[2.0, 0.0, -1.0], [0.0, 2.0, -1.0], [1.0, 0.5, 0.0], [0.2, 1.0, 0.0]])
    y = np.array([0, 1, 0, 1])  # class 2 never occurs
    c = IsotonicCalibration().fit(z, y)
    raw = apply_isotonic(c.knots_x_, c.knots_y_, c.offsets_, softmax64(z))
    assert np.all(raw[:, 2] == 0)
    np.testing.assert_allclose(c.predict_proba(z).sum(1), 1)
