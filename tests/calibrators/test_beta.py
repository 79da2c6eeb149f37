"""Beta calibration (Kull, Silva Filho & Flach 2017): known answers and agreement with betacal."""

import numpy as np
import pytest

from calbench.calibrators import get_calibrator
from calbench.calibrators.beta import apply_beta, fit_beta
from calbench.functional import softmax


def _nll(q, t):
    return -np.mean(t * np.log(q) + (1 - t) * np.log1p(-q))


def test_map_is_eq3_by_hand():
    # a = 2, b = 1, c = ln 3 at s = 0.5: exp(c) s^a / (1-s)^b = 3 * 0.25 / 0.5 = 1.5 -> 1.5 / 2.5
    assert apply_beta(np.array([2.0, 1.0, np.log(3.0)]), np.array([0.5]))[0] == pytest.approx(
        0.6, abs=1e-15
    )
    # a = b = 1, c = 0 is the identity map
    s = np.array([0.1, 0.3, 0.9])
    np.testing.assert_allclose(apply_beta(np.array([1.0, 1.0, 0.0]), s), s, atol=1e-15)


def test_recovers_the_generating_map():
    rng = np.random.default_rng(0)
    s = rng.uniform(0.01, 0.99, 200_000)
    true = np.array([1.7, 0.6, -0.4])
    t = rng.random(s.size) < apply_beta(true, s)
    np.testing.assert_allclose(fit_beta(s, t), true, atol=0.05)  # sampling error ~0.01


def test_negative_a_is_refitted_with_a_zero():
    # targets falling with s at low scores and rising at high ones make the free fit's a < 0
    s = np.r_[np.full(50, 0.01), np.full(50, 0.5), np.full(50, 0.99)]
    t = np.r_[np.ones(30), np.zeros(20), np.zeros(45), np.ones(5), np.ones(45), np.zeros(5)]
    coef = fit_beta(s, t)
    assert coef[0] == 0.0 and coef[1] > 0


@pytest.mark.parametrize("k", [2, 5])
def test_equals_betacal(k, problem):
    betacal = pytest.importorskip("betacal")
    z, y = problem(2000, k, seed=k)
    cal = get_calibrator("beta").fit(z, y)
    p = softmax(z)
    cols = [1] if k == 2 else range(k)
    for q, j in enumerate(cols):
        ref = betacal.BetaCalibration("abm").fit(p[:, j], y == j)
        ours = apply_beta(cal.coef_[q], p[:, j])
        theirs = ref.predict(p[:, j])
        # betacal's L-BFGS (scikit-learn, tol 1e-4, C = 1e11) stops short of the maximum
        # likelihood: ours is never worse and within 2e-3 of it on these well-conditioned problems
        assert _nll(ours, y == j) <= _nll(theirs, y == j) + 1e-12
        np.testing.assert_allclose(ours, theirs, atol=2e-3)
