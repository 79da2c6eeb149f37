"""What ``fit`` refuses, ``predict_proba`` refuses too; fits on too few samples are errors or
explicit warnings; a calibrator's error names the calibrator."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from calbench.calibrators import get_calibrator
from calbench.calibrators.base import Calibrator, FewSamplesWarning


def _z(n=60, k=3, seed=0):
    """Logits and labels they predict better than chance."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2
    return z, np.argmax(z + rng.normal(size=(n, k)) * 2, axis=1)


def _probs(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_predict_proba_refuses_probabilities_like_fit():
    z, y = _z()
    cal = get_calibrator("ts", device="cpu").fit(z, y)
    with pytest.raises(ValueError, match="calibrator ts: predict_proba got probabilities"):
        cal.predict_proba(_probs(z))
    with pytest.raises(ValueError, match="calibrator ts: fit got probabilities"):
        get_calibrator("ts", device="cpu").fit(_probs(z), y)


def test_allow_probabilities_carries_from_fit_to_predict_and_through_json():
    z, y = _z()
    p = _probs(z)
    cal = get_calibrator("ts", device="cpu").fit(p, y, allow_probabilities=True)
    out = cal.predict_proba(p)
    assert out.shape == p.shape
    back = Calibrator.from_dict(json.loads(json.dumps(cal.to_dict())))
    np.testing.assert_array_equal(back.predict_proba(p), out)
    with pytest.raises(ValueError, match="predict_proba got probabilities"):
        back.predict_proba(p, allow_probabilities=False)
    plain = get_calibrator("ts", device="cpu").fit(z, y)
    assert "allow_probabilities" not in plain.to_dict()  # files written before stay the same


def test_fit_on_one_sample_is_an_error_naming_the_calibrator():
    z, y = _z(n=1)
    with pytest.raises(ValueError, match="calibrator vs: fit got 1 sample; pass at least 2"):
        get_calibrator("vs", device="cpu").fit(z, y)


def test_too_few_samples_or_one_class_warn_explicitly():
    z, y = _z(n=5, k=4)
    with pytest.warns(
        FewSamplesWarning, match=r"calibrator ms_b: 5 samples for 20 fitted parameters"
    ):
        get_calibrator("ms_b", device="cpu").fit(z, y)
    z, _ = _z(n=50)
    z[:, 0] += 3.0  # the logits favour class 0, the only label
    with pytest.warns(FewSamplesWarning, match="all labels are one class"):
        get_calibrator("ts", device="cpu").fit(z, np.zeros(50, dtype=int))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        get_calibrator("ts", device="cpu").fit(*_z(n=50))  # 50 samples for 1 parameter: silent
        get_calibrator("uncalibrated").fit(z, np.zeros(50, dtype=int))  # nothing estimated


def test_bad_input_errors_name_the_calibrator():
    z, y = _z()
    z[0, 0] = np.nan
    with pytest.raises(ValueError, match="calibrator hist: logits contain 1 NaN"):
        get_calibrator("hist").fit(z, y)
    cal = get_calibrator("iso").fit(*_z())
    with pytest.raises(ValueError, match="calibrator iso: logits have 4 classes"):
        cal.predict_proba(np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"calibrator iso \(IsotonicCalibration\) is not fitted"):
        get_calibrator("iso").predict_proba(z)
