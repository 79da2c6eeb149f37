"""Dirichlet calibration: matrix scaling on log-probabilities with ODIR (Kull et al. 2019)."""

import numpy as np
import pytest

from calbench.calibrators.dirichlet import DirichletCalibration
from calbench.calibrators.scaling import MatrixScalingBias
from calbench.functional import log_softmax
from conftest import sample_labels, softmax64


def _data(seed=0, n=3000, k=4):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 3
    # true calibration map acts on log-probabilities: q = softmax(0.5 * log p + c)
    logp = np.log(softmax64(z))
    y = sample_labels(rng, softmax64(0.5 * logp + np.array([0.3, 0.0, -0.2, 0.1])))
    return z, y


def test_equals_matrix_scaling_of_log_softmax():
    z, y = _data(n=800)
    logp = np.log(softmax64(z))
    kw = {"device": "cpu", "dtype": "float64", "line_search": "strong_wolfe", "max_iter": 100}
    d = DirichletCalibration(**kw).fit(z, y)
    m = MatrixScalingBias(odir=(1e-3, 1e-3), **kw).fit(logp, y)
    np.testing.assert_allclose(d.predict_proba(z), m.predict_proba(logp), atol=1e-6)


def test_recovers_map_and_improves_nll():
    z, y = _data(1, n=20000)
    d = DirichletCalibration(
        device="cpu", dtype="float64", line_search="strong_wolfe", odir=(0.0, 0.0)
    )
    d.fit(z, y)
    w, b = d.params_["W"], d.params_["b"]
    # log p = z - lse(z): the map is identified up to adding a constant to every column of W
    # (absorbed by softmax), so compare the fitted map's probabilities with the truth
    logp = np.log(softmax64(z))
    truth = softmax64(0.5 * logp + np.array([0.3, 0.0, -0.2, 0.1]))
    err = np.abs(d.predict_proba(z) - truth)
    assert err.mean() < 0.01 and err.max() < 0.08  # sampling error of 20 parameters, N = 20000
    nll = lambda p: -np.mean(np.log(p[np.arange(len(y)), y]))  # noqa: E731
    assert nll(d.predict_proba(z)) < nll(softmax64(z)) - 0.1
    assert w.shape == (4, 4) and b.shape == (4,)


def test_default_odir_is_documented_value():
    assert DirichletCalibration().get_params()["odir"] == [1e-3, 1e-3]
    with pytest.raises(ValueError, match="odir"):
        DirichletCalibration(odir=(-1, 0))


def test_default_optimiser_is_float32_lbfgs_with_wolfe_line_search():
    params = DirichletCalibration().get_params()
    assert params["line_search"] == "strong_wolfe" and params["dtype"] == "float32"
    assert params["max_iter"] == 1000
    z, y = _data(2, n=600)
    d = DirichletCalibration(device="cpu").fit(z, y)
    m = MatrixScalingBias(odir=(1e-3, 1e-3), line_search="strong_wolfe", device="cpu")
    m.fit(log_softmax(z), y)  # the same float32 LBFGS problem
    for name in ("W", "b"):
        np.testing.assert_array_equal(d.params_[name], m.params_[name])
    # an explicit choice still wins, and survives the JSON round trip
    d2 = DirichletCalibration(line_search=None)
    assert DirichletCalibration.from_dict(d2.to_dict()).get_params()["line_search"] is None
