"""Mechanics of the base class with a minimal calibrator defined here (not registered globally)."""

import json

import numpy as np
import pytest

from calbench.calibrators.base import (
    REGISTRY,
    Calibrator,
    from_jsonable,
    get_calibrator,
    load_calibrator,
    register,
    save_calibrator,
    to_jsonable,
)
from calbench.calibrators.storage import sealed_text


@pytest.fixture
def shift_cls():
    class Shift(Calibrator):
        """Adds a fitted per-class offset (the label frequencies' log) to the logits."""

        name = "_test_shift"

        def __init__(self, smoothing=1.0):
            super().__init__(smoothing=smoothing)
            self.smoothing = smoothing

        def _fit(self, logits, labels):
            counts = np.bincount(labels, minlength=logits.shape[1]) + self.smoothing
            self.offset_ = np.log(counts / counts.sum()).astype(np.float32)

        def _predict_proba(self, logits):
            z = logits + self.offset_
            e = np.exp(z - z.max(1, keepdims=True))
            return e / e.sum(1, keepdims=True)

        def _get_state(self):
            return {"offset": self.offset_}

        def _set_state(self, state):
            self.offset_ = state["offset"]

    register(Shift)
    yield Shift
    REGISTRY.pop("_test_shift")


def test_round_trip_through_json_is_bit_exact(shift_cls, tmp_path):
    rng = np.random.default_rng(1)
    z = rng.normal(size=(50, 3)).astype(np.float32)
    y = rng.integers(0, 3, 50)
    cal = get_calibrator("_test_shift", smoothing=0.5).fit(z, y)
    save_calibrator(cal, tmp_path / "c.json")
    back = load_calibrator(tmp_path / "c.json")
    assert type(back) is shift_cls and back.get_params() == {"smoothing": 0.5}
    assert back.offset_.dtype == np.float32
    assert np.array_equal(back.predict_proba(z), cal.predict_proba(z))
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]


def test_unfitted_calibrator_serialises_without_state(shift_cls):
    d = shift_cls().to_dict()
    assert d == {"method": "_test_shift", "params": {"smoothing": 1.0}, "state": None}
    assert Calibrator.from_dict(json.loads(json.dumps(d))).n_classes_ is None


def test_predict_before_fit_and_wrong_width_are_refused(shift_cls):
    with pytest.raises(ValueError, match="not fitted; call fit"):
        shift_cls().predict_proba(np.zeros((2, 3)))
    cal = shift_cls().fit(np.zeros((4, 3)), [0, 1, 2, 0])
    with pytest.raises(
        ValueError, match="logits have 4 classes but the calibrator was fitted on 3"
    ):
        cal.predict_proba(np.zeros((2, 4)))


def test_fit_validates_inputs(shift_cls):
    with pytest.raises(ValueError, match="NaN"):
        shift_cls().fit(np.array([[0.0, np.nan]]), [0])
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 1\]"):
        shift_cls().fit(np.zeros((2, 2)), [0, 2])


def test_unknown_names_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown calibrator 'nope'"):
        get_calibrator("nope")
    (tmp_path / "bad.json").write_text(sealed_text({"method": "nope", "params": {}, "state": None}))
    with pytest.raises(ValueError, match="unknown calibrator method 'nope'"):
        load_calibrator(tmp_path / "bad.json")
    (tmp_path / "trunc.json").write_text('{"method": "ts", "par')
    with pytest.raises(ValueError, match="not valid calibrator JSON"):
        load_calibrator(tmp_path / "trunc.json")


def test_jsonable_preserves_dtype_and_shape():
    a = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    back = from_jsonable(json.loads(json.dumps(to_jsonable({"a": a, "s": np.float64(0.1)}))))
    assert back["a"].dtype == np.float32 and back["a"].shape == (2, 3)
    assert np.array_equal(back["a"], a) and back["s"] == 0.1


def test_register_refuses_duplicates_and_nameless(shift_cls):
    class Other(Calibrator):
        name = "_test_shift"

    with pytest.raises(TypeError, match="registered twice"):
        register(Other)

    class Nameless(Calibrator):
        pass

    with pytest.raises(TypeError, match="non-empty class attribute"):
        register(Nameless)


def test_a_failed_refit_leaves_the_calibrator_unfitted(shift_cls):
    cal = shift_cls().fit(np.zeros((4, 3)), [0, 1, 2, 0])
    cal.smoothing = float("nan")

    def boom(logits, labels):
        raise ValueError("fit diverged")

    cal._fit = boom
    with pytest.raises(ValueError, match="fit diverged"):
        cal.fit(np.zeros((4, 3)), [0, 1, 2, 0])
    with pytest.raises(ValueError, match="not fitted"):
        cal.predict_proba(np.zeros((1, 3)))
