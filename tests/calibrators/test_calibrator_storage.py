"""The calibrator file format (calbench.calibrators.storage): compact, bit-exact, sealed by a
digest, and every state validated against what it claims on load."""

import json
import warnings

import numpy as np
import pytest

import calbench.calibrators.base as base
from calbench.calibrators import REGISTRY, get_calibrator, load_calibrator, save_calibrator
from calbench.calibrators.storage import (
    SMALL_ARRAY,
    decode_array,
    from_jsonable,
    sealed_text,
    to_jsonable,
)
from calbench.steps import load_checked_calibrator
from conftest import make_problem

OURS = sorted(n for n, c in REGISTRY.items() if c.__module__.startswith("calbench."))
#: bytes a file may hold beyond 4x its parameters: keys, params, fitted_on, digest
OVERHEAD = 2048


def _params(name):
    cls = REGISTRY[name]
    kw = {"device": "cpu"} if "device" in cls.accepted_params() else {}
    if "lambdas" in cls.accepted_params():  # cross-validated grids: one pair
        kw["lambdas"] = [1e-3]
        if "mus" in cls.accepted_params():
            kw["mus"] = [1e-3]
    return kw


def _raw_bytes(state) -> int:
    total = 0
    for v in state.values():
        for a in v if isinstance(v, list) else [v]:
            total += np.asarray(a).nbytes
    return total


def _same(a, b) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("name", OURS)
def test_every_calibrator_round_trips_bit_exactly_in_a_compact_file(name, tmp_path):
    """File <= 4x the parameters' raw bytes + a constant (number lists were up to 6.7x: ms_b)."""
    z, y = make_problem(400, 20, seed=3)
    if name == "platt":
        z, y = z[:, :2], y % 2
    cal = get_calibrator(name, **_params(name)).fit(z.astype(np.float32), y)
    cal.set_fitted_on("a" * 64, "b" * 64)
    path = tmp_path / f"{name}.json"
    save_calibrator(cal, path)
    back = load_calibrator(path)
    state, again = cal._get_state(), back._get_state()
    assert state.keys() == again.keys()
    assert all(_same(state[k], again[k]) for k in state), name
    zt = make_problem(200, z.shape[1], seed=4)[0].astype(np.float32)
    assert cal.predict_proba(zt).tobytes() == back.predict_proba(zt).tobytes()
    raw = _raw_bytes(state)
    size = path.stat().st_size
    assert size <= 4 * raw + OVERHEAD, f"{name}: {size} bytes for {raw} bytes of parameters"


def test_large_arrays_are_base64_small_ones_readable_and_byte_order_is_fixed():
    big = np.arange(SMALL_ARRAY + 1, dtype=">f8") / 3  # big-endian in memory
    enc = to_jsonable({"big": big, "small": np.float32([0.5, 2.0])})
    assert isinstance(enc["big"]["__ndarray__"], str)
    assert enc["small"]["__ndarray__"] == [0.5, 2.0]
    back = from_jsonable(json.loads(json.dumps(enc)))
    assert back["big"].dtype == np.float64 and np.array_equal(back["big"], big)
    assert back["big"].flags.writeable
    # little-endian bytes whatever the machine: 1/3 as float64 little-endian starts 0x55 0x55
    import base64

    assert base64.b64decode(enc["big"]["__ndarray__"])[8:10] == b"\x55\x55"


def test_a_5000_sample_venn_abers_fit_is_near_its_parameters(tmp_path):
    z, y = make_problem(5000, 20, seed=1)
    cal = get_calibrator("venn_abers").fit(z, y)
    save_calibrator(cal, tmp_path / "va.json")
    raw = _raw_bytes(cal._get_state())
    assert (tmp_path / "va.json").stat().st_size <= 1.4 * raw + OVERHEAD


@pytest.fixture
def fitted(tmp_path):
    """``fitted(name, **params) -> (path, doc without digest)`` of a calibrator fitted and saved."""

    def make(name, **params):
        z, y = make_problem(400, 5, seed=2)
        cal = get_calibrator(name, **{**_params(name), **params}).fit(z, y)
        cal.set_fitted_on("a" * 64, "b" * 64)
        path = tmp_path / f"{name}.json"
        save_calibrator(cal, path)
        doc = json.loads(path.read_text())
        del doc["sha256"]
        return path, doc

    return make


def _refused(path, match):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an error, not a warning
        with pytest.raises(ValueError, match=match) as exc:
            load_calibrator(path)
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)


def _reseal(path, doc):
    path.write_text(sealed_text(doc, allow_nan=True))
    return path


def _set(doc, field, arr):
    doc["state"][field] = to_jsonable(np.asarray(arr))


def test_an_edited_or_unsealed_file_is_refused(fitted):
    path, doc = fitted("ts")
    load_calibrator(path)
    edited = json.loads(path.read_text())
    edited["state"]["a"]["__ndarray__"] = [0.5]  # a plausible temperature, but not the fitted one
    path.write_text(json.dumps(edited))
    _refused(path, "does not match its sha256 digest: .*refit")
    _reseal(path, doc)
    edited = json.loads(path.read_text())
    del edited["fitted_on"]  # would skip the fitted-on-other-logits check
    path.write_text(json.dumps(edited))
    _refused(path, "does not match its sha256")
    path.write_text(json.dumps(doc))
    _refused(path, "holds no sha256 digest.*refit")


@pytest.mark.parametrize("name", ["iso", "cir"])
def test_reversed_isotonic_knots_are_refused(fitted, name):
    """Knots applied in reverse order turned a 0.565-accuracy model into 0.13."""
    path, doc = fitted(name)
    off = decode_array(doc["state"]["offsets"])
    for field in ("knots_x", "knots_y"):
        arr = decode_array(doc["state"][field])
        for a, b in zip(off[:-1], off[1:], strict=True):
            arr[a:b] = arr[a:b][::-1].copy()
        _set(doc, field, arr)
    _refused(_reseal(path, doc), "knots_x must rise strictly")
    path, doc = fitted(name)
    arr = decode_array(doc["state"]["knots_y"])
    a, b = off[0], off[1]
    arr[a:b] = np.sort(arr[a:b])[::-1]
    _set(doc, "knots_y", arr)
    if np.any(np.diff(arr[a:b]) < 0):
        _refused(_reseal(path, doc), "knots_y must not decrease")


@pytest.mark.parametrize("name, field", [("venn_abers", "scores"), ("spline", "knots")])
def test_unsorted_knots_of_other_calibrators_are_refused(fitted, name, field):
    path, doc = fitted(name)
    arr = decode_array(doc["state"][field])
    arr[:2] = arr[:2][::-1].copy()
    _set(doc, field, arr)
    _refused(_reseal(path, doc), f"{field} must rise strictly")


def test_unsorted_bbq_breaks_are_refused(fitted):
    path, doc = fitted("bbq")
    arr = decode_array(doc["state"]["breaks"][1])
    arr[:2] = arr[:2][::-1].copy()
    doc["state"]["breaks"][1] = to_jsonable(arr)
    _refused(_reseal(path, doc), "breaks of class 1 must rise strictly")
    path, doc = fitted("bbq")
    vals = decode_array(doc["state"]["values"][0])
    doc["state"]["values"][0] = to_jsonable(vals[:-1])
    _refused(_reseal(path, doc), "class 0 has .* breaks but .* values")


@pytest.mark.parametrize(
    "entry, match",
    [
        ({"__ndarray__": [1.0], "dtype": "complex128", "shape": [1]}, "dtype 'complex128' is not"),
        ({"__ndarray__": [[1.0, 2.0]], "dtype": "float32", "shape": [1]}, "holds 2 values"),
        ({"__ndarray__": [float("nan")], "dtype": "float32", "shape": [1]}, "NaN or infinite"),
        ({"__ndarray__": [float("inf")], "dtype": "float64", "shape": [1]}, "NaN or infinite"),
        ({"__ndarray__": [1e300], "dtype": "float32", "shape": [1]}, "out of range for dtype"),
        ({"__ndarray__": [True], "dtype": "float32", "shape": [1]}, "numbers only"),
        ({"__ndarray__": ["1"], "dtype": "float32", "shape": [1]}, "numbers only"),
        ({"__ndarray__": [1.0], "dtype": "float32", "shape": [-1]}, "shape .* integers >= 0"),
    ],
)
def test_a_temperature_must_be_a_real_finite_number(fitted, entry, match):
    """A complex temperature was applied with a warning only."""
    path, doc = fitted("ts")
    doc["state"]["a"] = entry
    _refused(_reseal(path, doc), match)


def test_hist_bins_must_agree_with_n_bins(fitted):
    path, doc = fitted("hist", n_bins=10)
    load_calibrator(path)
    doc["params"]["n_bins"] = 15
    _refused(_reseal(path, doc), r"theta has 10 bins per class but n_bins = 15")


def test_values_out_of_range_for_their_dtype_are_one_line_errors(fitted):
    """300 declared int8 was an OverflowError traceback."""
    path, doc = fitted("iso")
    doc["state"]["offsets"] = {"__ndarray__": [0, 300], "dtype": "int8", "shape": [2]}
    _refused(_reseal(path, doc), r"value 300 is out of range for dtype int8")
    doc["state"]["offsets"] = {"__ndarray__": [0, 1.5], "dtype": "int64", "shape": [2]}
    _refused(_reseal(path, doc), r"non-integer values for dtype int64")


def test_sizes_are_checked_before_allocation(fitted):
    path, doc = fitted("venn_abers")
    entry = doc["state"]["scores"]
    for shape, match in (([10**10], "claims .* bytes, more than"), ([7], "base64 characters")):
        doc["state"]["scores"] = {**entry, "shape": shape}
        _refused(_reseal(path, doc), match)
    doc["state"]["scores"] = {**entry, "__ndarray__": "!" * len(entry["__ndarray__"])}
    _refused(_reseal(path, doc), "not valid base64")


def test_a_file_too_large_to_read_back_is_not_written(tmp_path, monkeypatch):
    z, y = make_problem(300, 30, seed=0)
    cal = get_calibrator("ms_b", device="cpu", max_iter=5).fit(z, y)
    monkeypatch.setattr(base, "MAX_JSON_BYTES", 4000)
    with pytest.raises(ValueError, match="would write .* bytes .* more than a calibrator file"):
        save_calibrator(cal, tmp_path / "ms_b.json")
    assert not list(tmp_path.iterdir())


def test_a_calibrator_recording_no_fitted_on_is_refused_where_it_is_checked(fitted):
    """Deleting fitted_on used to skip the fitted-on-other-logits check silently."""
    path, doc = fitted("ts")
    del doc["fitted_on"]
    _reseal(path, doc)
    halves = {"meta": {"order_hash": "a" * 64, "logits_sha256": "b" * 64}}
    with pytest.raises(ValueError, match="records no fitted_on .* --allow-other-logits"):
        load_checked_calibrator(path, halves)
    load_checked_calibrator(path, halves, allow_other_logits=True)
    doc["fitted_on"] = {"order_hash": "", "logits_sha256": ""}
    _refused(_reseal(path, doc), "fitted_on must hold the non-empty strings")
