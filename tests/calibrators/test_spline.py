"""Spline calibration (Lucena 2018): known answers and agreement with ml_insights.SplineCalib."""

import numpy as np
import pytest

from calbench.calibrators import get_calibrator
from calbench.calibrators.spline import (
    choose_knots,
    fit_penalised_logistic,
    ncs_basis,
    stratified_folds,
)
from calbench.functional import softmax


def test_natural_spline_basis_is_linear_beyond_the_boundary_knots():
    knots = np.array([-2.0, -0.5, 0.0, 1.0, 3.0])
    x = np.array([3.0, 4.0, 5.0, 6.0])
    b = ncs_basis(x, knots)
    np.testing.assert_allclose(np.diff(b, 2, axis=0), 0.0, atol=1e-9)  # zero second differences
    x = np.array([-5.0, -4.0, -3.0])
    np.testing.assert_allclose(ncs_basis(x, knots)[:, 2:], 0.0)  # left of the first knot: 1, x only
    # N_3 at x = 2 by hand (xi_1 = -2, xi_{K-1} = 1, xi_K = 3): d_1 = 4^3 / 5, d_{K-1} = 1^3 / 2
    assert ncs_basis(np.array([2.0]), knots)[0, 2] == pytest.approx(64 / 5 - 1 / 2, abs=1e-13)


def test_penalised_logistic_stationarity():
    rng = np.random.default_rng(0)
    x = np.c_[np.ones(500), rng.normal(size=(500, 2))]
    y = (rng.random(500) < 0.4).astype(float)
    w = rng.uniform(0.5, 2.0, 500)
    beta = fit_penalised_logistic(x, y, w, 0.3)
    z = 1 / (1 + np.exp(-x @ beta))
    grad = x.T @ (w * (z - y)) / 500 + 2 * 0.3 / 3 * beta
    np.testing.assert_allclose(grad, 0.0, atol=1e-10)


def test_folds_are_stratified_and_balanced():
    y = np.r_[np.zeros(50), np.ones(30)]
    f = stratified_folds(y)
    assert set(np.unique(f)) == {0, 1, 2, 3, 4}
    for v in (0, 1):
        np.testing.assert_array_equal(
            np.bincount(f[y == v].astype(int)), np.full(5, (y == v).sum() // 5)
        )


def test_knots_include_the_ends_and_the_fixed_grid():
    s = np.linspace(0.001, 0.999, 200)
    kn = choose_knots(s)
    assert kn[0] == s[0] and kn[-1] == s[-1]
    assert np.all(np.isin(np.round(np.linspace(0.1, 0.9, 9), 12), np.round(kn, 12)))
    assert kn.size == 30 + 9


def _check_against(ref, p, y, cols):
    from calbench.calibrators.spline import fit_penalised_logistic, fit_spline, penalised_loss

    refs = ref.binary_splinecalibs if len(cols) > 1 else [ref]
    same = []
    for j, b in zip(cols, refs, strict=True):
        kt, coef, eps, lam, (x, yy, w) = fit_spline(p[:, j], y == j)
        np.testing.assert_array_equal(kt, b.knot_vec_tr)  # same knots and eps
        assert eps == b.logodds_eps
        # at the reference's lambda, the same objective on the same folds: ours is its exact
        # optimum, SplineCalib's BFGS stops at a gradient norm of 1e-4 (never better, within
        # 5e-4 on these problems)
        lam_ref = float(b.best_reg_param)
        exact = fit_penalised_logistic(x, yy, w, lam_ref)
        ours, theirs = (
            penalised_loss(x, yy, w, lam_ref, exact),
            penalised_loss(x, yy, w, lam_ref, b.basis_coef_vec),
        )
        assert ours <= theirs + 1e-12
        assert theirs - ours < 5e-4
        same.append(lam == lam_ref)
    return same


@pytest.mark.parametrize(("k", "seed"), [(2, 0), (2, 3), (3, 2)])
def test_agrees_with_splinecalib(k, seed, problem):
    mli = pytest.importorskip("ml_insights")
    z, y = problem(800, k, seed=seed)
    zt, _ = problem(400, k, seed=seed + 1)
    p = softmax(z)
    ref = mli.SplineCalib()
    ref.fit(p, y)
    same = _check_against(ref, p, y, [1] if k == 2 else list(range(k)))
    if all(same):  # same lambda everywhere (seed 3): same probabilities up to BFGS's stopping
        np.testing.assert_allclose(get_calibrator("spline").fit(z, y).predict_proba(zt),
                                   ref.predict_proba(softmax(zt)), atol=1e-4)  # fmt: skip
    if (k, seed) == (2, 3):
        assert all(same)
