"""Calibration / refinement split of log-loss and Brier (probmetrics' ts-mix estimator)."""

import sys
import types

import numpy as np
import pytest

from calbench.functional import softmax
from calbench.metrics.refinement import (
    calib_err_logloss,
    loss_split,
    refinement_brier,
    refinement_logloss,
)


def test_calibrated_uniform_predictions_have_no_calibration_error():
    # p uniform over K classes with uniformly drawn labels: TS cannot improve it; the mixture
    # with the uniform leaves it unchanged; the split is (0, log K)
    k = 4
    p = np.full((400, k), 1 / k)
    y = np.arange(400) % k
    ce, ref = loss_split(p, y)
    assert ce == pytest.approx(0.0, abs=1e-12) and ref == pytest.approx(np.log(k), abs=1e-12)
    ce, ref = loss_split(p, y, "brier")
    assert ce == pytest.approx(0.0, abs=1e-12) and ref == pytest.approx(1 - 1 / k, abs=1e-12)


def test_overconfident_predictions_have_positive_calibration_error():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(3000, 5)) * 3
    y = np.array([rng.choice(5, p=r) for r in softmax(z / 3)])
    assert calib_err_logloss(softmax(z), y) > 0.05
    assert refinement_logloss(softmax(z), y) < refinement_logloss(softmax(z), rng.permutation(y))


def test_equals_probmetrics():
    pytest.importorskip("probmetrics")
    import torch

    try:  # probmetrics imports numba for a solver the ts-mix estimator does not use
        import numba  # noqa: F401
    except ImportError:
        stub = types.ModuleType("numba")
        stub.njit = lambda *a, **k: a[0] if a and callable(a[0]) else (lambda f: f)
        sys.modules["numba"] = stub
    from probmetrics.metrics import Metrics

    rng = np.random.default_rng(1)
    z = rng.normal(size=(1000, 6)) * 3
    y = rng.integers(0, 6, 1000)
    y[:600] = z[:600].argmax(1)
    p = softmax(z)
    names = ["calib-err_logloss_ts-mix_all", "refinement_logloss_ts-mix_all",
             "calib-err_brier_ts-mix_all", "refinement_brier_ts-mix_all"]  # fmt: skip
    ref = Metrics.from_names(names).compute_all_from_labels_probs(
        torch.as_tensor(y), torch.as_tensor(p)
    )
    ours = [*loss_split(p, y, "logloss"), *loss_split(p, y, "brier")]
    # probmetrics bisects the inverse temperature to 3e-8; the losses are flat at the optimum: 1e-8
    np.testing.assert_allclose(ours, [float(ref[n]) for n in names], atol=1e-8)
    assert refinement_brier(p, y) == pytest.approx(
        float(ref["refinement_brier_ts-mix_all"]), abs=1e-8
    )


def test_the_four_metrics_share_one_fit_per_prediction_set_and_stay_exact(monkeypatch):
    from calbench.metrics import refinement

    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(5) * 0.4, size=400)
    y = rng.integers(0, 5, 400)
    four = (
        refinement.calib_err_logloss,
        refinement.refinement_logloss,
        refinement.calib_err_brier,
        refinement.refinement_brier,
    )
    refinement._FITTED.clear()
    fresh = [f(p, y) for f in four]
    calls = []
    real = refinement.fit_inverse_temperature
    monkeypatch.setattr(
        refinement, "fit_inverse_temperature", lambda *a: calls.append(1) or real(*a)
    )
    refinement._FITTED.clear()
    again = [f(p, y) for f in four]
    assert again == fresh and len(calls) == 1
    q = p.copy()
    q[0] = q[0][::-1]  # one sample differs: a new fit, another value
    assert refinement.calib_err_logloss(q, y) != fresh[0] and len(calls) == 2
