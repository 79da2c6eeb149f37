"""Ensemble temperature scaling (Zhang, Kailkhura & Han 2020): known answers and a rebuild of the
authors' two-stage fit (scipy L-BFGS-B for T, SLSQP for the weights) from the paper's eq. (8)."""

import numpy as np
import pytest
from scipy.optimize import minimize

from calbench.calibrators import get_calibrator
from calbench.calibrators.ets import simplex_qp
from calbench.functional import softmax


def test_simplex_qp_known_answers():
    g = np.eye(3)
    # min ||w||^2 - 2 c.w on the simplex: interior point w = c + (1 - sum c)/3
    np.testing.assert_allclose(
        simplex_qp(g, np.array([0.5, 0.3, 0.2])), [0.5, 0.3, 0.2], atol=1e-14
    )
    # the unconstrained optimum (2, 0, 0) projects to the vertex (1, 0, 0)
    np.testing.assert_allclose(
        simplex_qp(g, np.array([2.0, 0.0, 0.0])), [1.0, 0.0, 0.0], atol=1e-14
    )
    # an edge: (0.8, 0.6, -1) -> (0.6, 0.4, 0)
    np.testing.assert_allclose(
        simplex_qp(g, np.array([0.8, 0.6, -1.0])), [0.6, 0.4, 0.0], atol=1e-14
    )


def test_uninformative_logits_get_the_uniform_component():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(4000, 5)) * 4
    y = rng.integers(0, 5, 4000)  # independent of z: the best mixture is (nearly) uniform
    cal = get_calibrator("ets").fit(z, y)
    assert cal.weights_[2] > 0.9
    np.testing.assert_allclose(cal.predict_proba(z), 0.2, atol=0.05)


def _authors_fit(z, y, loss):
    k = z.shape[1]
    onehot = np.eye(k)[y]

    def lt(t, zz=z):
        p = softmax(zz / t[0])
        if loss == "mse":
            return np.mean((p - onehot) ** 2)
        return -np.sum(onehot * np.log(p + 1e-12)) / len(y)

    t = minimize(lt, 1.0, method="L-BFGS-B", bounds=((0.05, 5.0),), tol=1e-12).x[0]
    parts = [softmax(z / t), softmax(z), np.full(z.shape, 1.0 / k)]

    def lw(w):
        p = w[0] * parts[0] + w[1] * parts[1] + w[2] * parts[2]
        if loss == "mse":
            return np.mean((p - onehot) ** 2)
        return -np.sum(onehot * np.log(p + 1e-12)) / len(y)

    w = minimize(lw, (1.0, 0.0, 0.0), method="SLSQP", bounds=((0, 1),) * 3, tol=1e-12,
                 constraints={"type": "eq", "fun": lambda w: np.sum(w) - 1}).x  # fmt: skip
    return t, w


@pytest.mark.parametrize("loss", ["mse", "nll"])
@pytest.mark.parametrize("seed", [0, 1])
def test_equals_the_authors_two_stage_fit(loss, seed, problem):
    z, y = problem(2000, 10, seed=seed, temperature=2.5)
    z = np.concatenate([z[:1000], z[1000:] * 0.3])  # a mixture the uniform/raw parts can help
    cal = get_calibrator("ets", loss=loss).fit(z, y)
    t, w = _authors_fit(z, y, loss)
    # both solve the same 1-D and 3-D problems; scipy's tolerances (1e-12 on the loss) leave
    # about 1e-5 on the arguments
    assert cal.temperature_ == pytest.approx(t, abs=1e-4)
    np.testing.assert_allclose(cal.weights_, w, atol=1e-4)
    k = z.shape[1]
    ref = w[0] * softmax(z / t) + w[1] * softmax(z) + w[2] / k
    np.testing.assert_allclose(cal.predict_proba(z), ref, atol=1e-5)


def test_rejects_unknown_loss():
    with pytest.raises(ValueError, match="loss must be one of"):
        get_calibrator("ets", loss="brier")
