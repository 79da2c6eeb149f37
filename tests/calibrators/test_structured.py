"""Structured vector / matrix scaling (Berta et al. 2025): known answers and probmetrics."""

import numpy as np
import pytest

from calbench.calibrators import get_calibrator
from calbench.calibrators.structured import (
    fit_inverse_temperature,
    fit_sms,
    fit_svs,
    float32_log_features,
    ts_mix_probs,
)
from calbench.functional import clipped_log_probs, log_softmax, softmax


def test_inverse_temperature_is_the_stationary_point(problem):
    z, y = problem(3000, 6, seed=0)
    lp = clipped_log_probs(z)
    a = fit_inverse_temperature(lp, y)
    p = softmax(a * lp)
    grad = np.mean((p * lp).sum(1) - lp[np.arange(y.size), y])
    assert abs(grad) < 1e-12
    assert a == pytest.approx(0.5, abs=0.05)  # labels drawn at temperature 2


def test_zero_penalty_svs_is_plain_vector_scaling_and_huge_penalty_is_identity(problem):
    z, y = problem(2000, 4, seed=1)
    x = log_softmax(z)
    v, b = fit_svs(x, y, 1e8, 1e8)
    np.testing.assert_allclose(v, 1.0, atol=1e-6)
    np.testing.assert_allclose(b, 0.0, atol=1e-6)
    v, b = fit_svs(x, y, 0.0, 0.0)
    s = x * v + b  # the gradient of the unpenalised NLL vanishes at the optimum
    g = (softmax(s) - np.eye(4)[y]) / y.size
    np.testing.assert_allclose(np.einsum("ij,ij->j", g, x), 0.0, atol=1e-9)
    np.testing.assert_allclose(g.sum(0), 0.0, atol=1e-9)


def _objective(x, y, w, b, lam_b, lam_d, lam_o):
    d = w - np.eye(w.shape[0])
    ls = log_softmax(x @ w.T + b)
    off = d - np.diag(np.diag(d))
    return (
        -ls[np.arange(y.size), y].mean()
        + lam_b * b @ b
        + lam_d * np.sum(np.diag(d) ** 2)
        + lam_o * np.sum(off**2)
    )


@pytest.mark.parametrize("name", ["svs", "sms"])
def test_agrees_with_probmetrics(name, problem, probmetrics_calibrators):
    import torch

    z, y = problem(600, 5, seed=3)
    zt, _ = problem(300, 5, seed=4)
    cal = get_calibrator(name).fit(z, y)
    ref = probmetrics_calibrators.get_calibrator(name).fit(softmax(z), y)
    # the TS-mix step: probmetrics bisects 30 times on log a (within 3e-8 of the optimum)
    assert cal.a_ == pytest.approx(ref.ts_.cal_.invtemp_, rel=1e-7)
    # probmetrics minimises in float32 (torchmin BFGS): fitted probabilities agree to 1e-3, and
    # ours is never a worse value of the same objective
    np.testing.assert_allclose(cal.predict_proba(zt), ref.predict_proba(softmax(zt)), atol=1e-3)
    n, k = z.shape
    x = float32_log_features(ts_mix_probs(clipped_log_probs(z), cal.a_, cal.mix_))
    lam = (k / n, k / n, k * (k - 1) / n if name == "sms" else 0.0)
    if name == "svs":
        ours = _objective(x, y, np.diag(cal.v_), cal.b_, *lam)
        theirs = _objective(x, y, np.diag(ref.v_), ref.b_, *lam)
        # the same objective handed to probmetrics' solver in float64 lands next to our optimum
        # (torchmin's BFGS stops at its default gradient tolerance, 1e-5: 5e-4 on the parameters)
        v64, b64 = ref._fit_bfgs(torch.tensor(x), torch.as_tensor(y), k, lam[0], lam[1])
        np.testing.assert_allclose(v64, cal.v_, atol=5e-4)
        np.testing.assert_allclose(b64, cal.b_, atol=5e-4)
    else:
        ours = _objective(x, y, cal.W_, cal.b_, *lam)
        theirs = _objective(x, y, ref.W_[:, :k].astype(float), ref.W_[:, k].astype(float), *lam)
        w64 = ref._fit_bfgs(torch.tensor(x), torch.as_tensor(y), k, *lam)
        np.testing.assert_allclose(w64[:, :k], cal.W_, atol=5e-4)
        np.testing.assert_allclose(w64[:, k], cal.b_, atol=5e-4)
    assert ours <= theirs + 1e-12


def test_sms_penalty_is_separate_on_diagonal_and_off_diagonal(problem):
    z, y = problem(1500, 4, seed=5)
    x = log_softmax(z)
    w, _ = fit_sms(x, y, 0.0, 0.0, 1e8)  # off-diagonal frozen at 0: the diagonal is still free
    off = w - np.diag(np.diag(w))
    assert np.abs(off).max() < 1e-6
    v, _ = fit_svs(x, y, 0.0, 0.0)
    np.testing.assert_allclose(np.diag(w), v, atol=1e-5)
