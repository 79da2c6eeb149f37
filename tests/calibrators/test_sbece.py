"""TS-SB-ECE: temperature fitted to soft-binned ECE (Karandikar et al. 2021)."""

import numpy as np
import pytest

from calbench.calibrators.sbece import TemperatureScalingSBECE
from calbench.metrics.soft import sb_ece
from conftest import sample_labels, softmax64


def _data(seed=0, n=4000, t_star=2.0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 10)) * 4
    return z, sample_labels(rng, softmax64(z / t_star))


def test_sbece_never_worse_than_nll_temperature_and_near_grid_optimum():
    z, y = _data(n=2000)
    c = TemperatureScalingSBECE(device="cpu", n_steps=80, lr=0.02).fit(z, y)
    obj = lambda t: sb_ece(softmax64(z / t), y, n_bins=15, temperature=1e-3, p=2)  # noqa: E731
    assert obj(c.temperature_) <= obj(c.nll_temperature_) + 1e-12
    grid = np.linspace(1.5, 2.6, 23)
    best = min(obj(t) for t in grid)
    assert obj(c.temperature_) <= best + 2e-3
    # data drawn from softmax(z / 2): the SB-ECE minimiser lies near the true temperature too
    assert c.temperature_ == pytest.approx(2.0, rel=0.1)
    assert c.objective(z, y, c.temperature_) == pytest.approx(obj(c.temperature_), abs=1e-9)


def test_predict_is_tempered_softmax_and_keeps_argmax():
    z, y = _data(1, n=500)
    c = TemperatureScalingSBECE(device="cpu", n_steps=10).fit(z, y)
    p = c.predict_proba(z)
    np.testing.assert_allclose(p, softmax64(z / c.temperature_), atol=1e-15)
    assert np.array_equal(p.argmax(1), z.argmax(1))


def test_options_validated():
    with pytest.raises(ValueError, match="form"):
        TemperatureScalingSBECE(form="hard")
    with pytest.raises(ValueError, match="n_steps"):
        TemperatureScalingSBECE(n_steps=0)
