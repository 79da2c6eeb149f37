"""A model that predicts one class (issue 33, group 13): calibrators that can fit it fit it, with
the constrained maximum of their likelihood, instead of failing with a wrong cause ("check
sample order") that stopped the whole calibrate job."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from calbench.calibrators import get_calibrator, load_calibrator, save_calibrator
from calbench.metrics import METRICS

N, K = 400, 5


def _one_class(seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(N, K))
    z[:, 2] += 8.0  # class 2 wins every row
    # labels independent of the logits, class 2 rarer than the others: the NLL slope at a = 0
    # is positive, so the unconstrained temperature fit is negative
    y = rng.choice(K, size=N, p=[0.22, 0.22, 0.12, 0.22, 0.22])
    return z, y


def test_temperature_scaling_fits_an_infinite_temperature_and_says_so():
    z, y = _one_class()
    with pytest.warns(UserWarning, match="predicts class 2 for all 400 samples"):
        cal = get_calibrator("ts").fit(z, y)
    p = cal.predict_proba(z)
    assert np.all(np.abs(p - 1 / K) < 1e-3)  # uniform to 1e-3
    assert np.all(p.argmax(1) == 2)  # accuracy unchanged, as temperature scaling promises
    # the constrained optimum: no positive temperature does better
    from calbench.metrics import nll

    assert nll(p, y) <= min(nll(get_calibrator("uncalibrated").fit(z / t, y).predict_proba(z / t), y)
                            for t in (1.0, 10.0, 100.0)) + 1e-6  # fmt: skip


def test_temperature_scaling_still_refuses_logits_of_other_samples():
    rng = np.random.default_rng(1)
    y = rng.integers(0, K, N)
    z = rng.normal(size=(N, K)) + 6.0 * np.eye(K)[y]  # a good model ...
    with pytest.raises(ValueError, match="check that logits and labels come from the same"):
        get_calibrator("ts").fit(z, np.roll(y[::-1], 7))  # ... whose labels are shuffled


def test_beta_keeps_its_map_monotone_on_scores_without_information(tmp_path):
    z, y = _one_class()
    cal = get_calibrator("beta").fit(z, y)
    assert np.all(cal.coef_[:, :2] >= 0)
    save_calibrator(cal, tmp_path / "beta.json")  # the file it writes is one it can read back
    np.testing.assert_allclose(load_calibrator(tmp_path / "beta.json").predict_proba(z),
                               cal.predict_proba(z))  # fmt: skip


@pytest.mark.parametrize("method", ["uncalibrated", "hist", "iso", "bbq", "ts", "ts_sbece", "vs", "vs_b",
                                    "ms_b", "dirichlet", "beta", "ets", "cir", "venn_abers", "svs", "sms"])  # fmt: skip
def test_every_default_calibrator_fits_a_one_class_model_and_every_metric_computes(tmp_path, method):
    z, y = _one_class()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = get_calibrator(method).fit(z.astype(np.float32), y)
        save_calibrator(cal, tmp_path / "c.json")
        p = load_calibrator(tmp_path / "c.json").predict_proba(z.astype(np.float32))
        for name, fn in METRICS.items():
            assert np.isfinite(float(fn(p, y))) or name in ("spiegelhalter_p",), name
