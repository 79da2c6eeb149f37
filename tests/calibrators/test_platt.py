"""Platt scaling against scikit-learn's logistic regression on the logit difference."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from calbench.calibrators.platt import PlattScaling, fit_platt, platt_objective
from conftest import sample_labels, softmax64


def _binary(seed, n=2000):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 2)) * 2
    y = sample_labels(rng, softmax64(0.6 * z + np.array([0.0, 0.4])))
    return z, y


def test_matches_sklearn_logistic_regression():
    z, y = _binary(0)
    c = PlattScaling().fit(z, y)
    f = (z[:, 1] - z[:, 0])[:, None]
    lr = LogisticRegression(C=1e12, tol=1e-12, max_iter=10000).fit(f, y)
    assert c.coef_ == pytest.approx(lr.coef_[0, 0], abs=1e-6)
    assert c.intercept_ == pytest.approx(lr.intercept_[0], abs=1e-6)
    np.testing.assert_allclose(c.predict_proba(z), lr.predict_proba(f), atol=1e-6)


def test_known_coefficients_recovered():
    rng = np.random.default_rng(1)
    f = rng.normal(size=50000) * 3
    y = (rng.random(f.size) < 1 / (1 + np.exp(-(0.5 * f - 1.0)))).astype(float)
    a, b = fit_platt(f, y)
    assert a == pytest.approx(0.5, abs=0.02) and b == pytest.approx(-1.0, abs=0.03)


def test_smoothed_targets_minimise_platt_objective():
    from scipy.optimize import minimize

    z, y = _binary(2, n=300)
    c = PlattScaling(smooth_targets=True).fit(z, y)
    f = z[:, 1] - z[:, 0]
    n1 = y.sum()
    t = np.where(y == 1, (n1 + 1) / (n1 + 2), 1 / (len(y) - n1 + 2))
    ref = minimize(lambda w: platt_objective(w[0], w[1], f, t), [0.0, 0.0], method="Nelder-Mead",
                   options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 20000})  # fmt: skip
    assert c.coef_ == pytest.approx(ref.x[0], abs=1e-5)
    assert c.intercept_ == pytest.approx(ref.x[1], abs=1e-5)


def test_more_than_two_classes_rejected():
    z = np.random.default_rng(3).normal(size=(20, 3))
    c = PlattScaling()
    with pytest.raises(ValueError, match="ts, vs, vs_b or dirichlet"):
        c.fit(z, np.arange(20) % 3)
    with pytest.raises(ValueError, match="not fitted"):
        c.predict_proba(z)


def test_tiny_tail_probabilities_keep_precision():
    c = PlattScaling().fit(
        np.array([[0.0, -1.0], [0.0, 1.0], [0.0, 0.5], [0.0, -0.5]]), [0, 1, 0, 1]
    )
    c.coef_, c.intercept_ = 1.0, 0.0
    p = c.predict_proba(np.array([[0.0, -50.0]]))
    assert p[0, 1] == pytest.approx(np.exp(-50), rel=1e-12)
