"""Every registered calibrator: unknown hyperparameters, fitted state read from JSON, probability
inputs to fit and the recorded identity of the fitted-on logits are checked, with one-line errors.

The tests iterate over the registry, so a calibrator added later is covered without new code.
"""

import json

import numpy as np
import pytest

from calbench.calibrators import REGISTRY, get_calibrator, load_calibrator, save_calibrator
from calbench.calibrators.base import Calibrator
from calbench.calibrators.storage import decode_array, sealed_text

OURS = sorted(n for n, c in REGISTRY.items() if c.__module__.startswith("calbench."))
TORCH_FITS = ("ts", "vs", "vs_b", "ms_b", "dirichlet", "ts_sbece")


def _problem(name, small_problem):
    z, y = small_problem
    if name == "platt":  # binary only
        return z[:, :2], (y % 2).astype(np.int64)
    return z, y


def _fast_params(name):
    cls = REGISTRY[name]
    kw = {"device": "cpu"} if "device" in cls.accepted_params() else {}
    if "n_steps" in cls.accepted_params():
        kw["n_steps"] = 20
    if "lambdas" in cls.accepted_params():  # cross-validated grids: one pair, not Kull's 432
        kw["lambdas"] = [1e-3]
        if "mus" in cls.accepted_params():
            kw["mus"] = [1e-3]
    return kw


@pytest.fixture
def fitted_files(small_problem, tmp_path):
    """``{name: (path, json dict, K)}`` of every calibrator fitted and saved."""
    out = {}
    for name in OURS:
        z, y = _problem(name, small_problem)
        cal = get_calibrator(name, **_fast_params(name)).fit(z, y)
        path = tmp_path / f"{name}.json"
        save_calibrator(cal, path)
        doc = json.loads(path.read_text())
        del doc["sha256"]  # the tests edit the state and re-seal it (_write)
        out[name] = (path, doc, z.shape[1])
    return out


def _write(path, doc):
    """Write ``doc`` with a valid digest: the state checks behind the digest are under test."""
    path.write_text(sealed_text(doc, allow_nan=True))
    return path


def _one_line_error(path, match):
    with pytest.raises(ValueError, match=match) as exc:
        load_calibrator(path)
    msg = str(exc.value)
    assert "\n" not in msg and str(path) in msg
    return msg


@pytest.mark.parametrize("name", OURS)
def test_every_calibrator_declares_a_state_schema_matching_its_state(name, fitted_files):
    cls = REGISTRY[name]
    assert isinstance(cls.state_schema, dict), f"{name} declares no state_schema"
    path, doc, _ = fitted_files[name]
    assert sorted(doc["state"]) == sorted(["n_classes", *cls.state_schema])
    load_calibrator(path)  # a freshly saved calibrator passes its own validation


@pytest.mark.parametrize("name", OURS)
def test_unknown_parameter_lists_the_accepted_ones(name, tmp_path, fitted_files):
    accepted = REGISTRY[name].accepted_params()
    with pytest.raises(
        ValueError, match=r"has no parameter\(s\) \['max_iters'\]; accepted: "
    ) as exc:
        get_calibrator(name, max_iters=5)
    assert all(a in str(exc.value) for a in accepted)
    with pytest.raises(ValueError, match="max_iters"):
        REGISTRY[name](max_iters=5)  # direct construction too, never a raw TypeError
    path, doc, _ = fitted_files[name]
    doc["params"]["max_iters"] = 5
    _one_line_error(_write(path, doc), r"params: .*max_iters")


def test_accepted_params_follow_the_init_signatures():
    assert set(REGISTRY["ts"].accepted_params()) == {
        "max_iter",
        "line_search",
        "dtype",
        "device",
        "l2",
        "precision",
    }
    assert "odir" in REGISTRY["ms_b"].accepted_params()
    assert "odir" not in REGISTRY["ts"].accepted_params()


class _NoParams(Calibrator):
    name = "_no_params"


class _Strict(_NoParams):
    def __init__(self, *, alpha: float = 1.0) -> None:
        super().__init__(alpha=alpha)


class _Forwarding(_Strict):
    def __init__(self, *, beta: int = 2, **kwargs) -> None:
        super().__init__(**kwargs)
        self.beta = beta


def test_accepted_params_of_new_subclasses_need_no_code():
    assert _NoParams.accepted_params() == ()
    with pytest.raises(ValueError, match="accepted: none"):
        _NoParams(n_bins=3)
    assert _Strict.accepted_params() == ("alpha",)
    assert _Forwarding.accepted_params() == ("beta", "alpha")
    _Forwarding(alpha=2.0, beta=3)
    with pytest.raises(
        ValueError, match=r"no parameter\(s\) \['gamma'\]; accepted: \['alpha', 'beta'\]"
    ):
        _Forwarding(gamma=1)


@pytest.mark.parametrize("name", OURS)
def test_every_state_field_is_checked(name, fitted_files):
    path, doc, k = fitted_files[name]
    for field in REGISTRY[name].state_schema:
        bad = json.loads(json.dumps(doc))
        del bad["state"][field]
        _one_line_error(_write(path, bad), f"state.{field} is missing")
        bad = json.loads(json.dumps(doc))
        value = bad["state"][field]
        if isinstance(value, list):  # ragged: list of arrays
            value = value[0]
        if isinstance(value, dict):
            flat = decode_array(value).astype(np.float64)
            if flat.size == 0:
                continue
            flat.reshape(-1)[0] = float("nan")
            value["__ndarray__"] = flat.tolist()
            value["dtype"] = "float64"
        else:
            bad["state"][field] = float("nan")
        _one_line_error(_write(path, bad), f"state.{field}.*NaN or infinite")
    bad = json.loads(json.dumps(doc))
    bad["state"]["extra"] = 1
    _one_line_error(_write(path, bad), "state.extra is not a field")
    bad = json.loads(json.dumps(doc))
    bad["state"]["n_classes"] = k + 1
    schema = REGISTRY[name].state_schema
    if name == "platt" or any(
        f.ragged or "K" in f.shape or "K+1" in f.shape for f in schema.values()
    ):
        _one_line_error(_write(path, bad), "state")


@pytest.mark.parametrize(
    "name, field, value, match",
    [
        ("ts", "a", [-1.0], r"state.a = -1 must be > 0 \(a = 1/T"),
        ("ts", "a", [0.0], r"state.a = 0 must be > 0"),
        ("ts", "a", [1.0, 2.0], r"state.a has shape \(2,\), expected \(1,\)"),
        ("vs", "v", [1.0, 1.0], r"state.v has shape \(2,\), expected \(4,\) for K=4"),
        ("ms_b", "W", [[1.0] * 4] * 3, r"state.W has shape \(3, 4\), expected \(4, 4\)"),
        ("hist", "theta", [[1.5] * 20] * 4, r"state.theta = 1.5 must be <= 1"),
        ("iso", "offsets", [0, 1, 2, 3, 9], r"state: offsets must rise"),
    ],
)
def test_constraints_and_shapes(fitted_files, name, field, value, match):
    path, doc, _ = fitted_files[name]
    arr = np.asarray(value, dtype=np.int64 if field == "offsets" else np.float32)
    doc["state"][field] = {
        "__ndarray__": arr.tolist(),
        "dtype": str(arr.dtype),
        "shape": list(arr.shape),
    }
    _one_line_error(_write(path, doc), match)


def test_ts_temperature_constraint_is_what_corrupts_results(fitted_files, small_problem):
    """A negative temperature would invert the ranking (accuracy ~0), so it must not load."""
    path, doc, _ = fitted_files["ts"]
    doc["state"]["a"]["__ndarray__"] = [-1.0]
    z, y = small_problem
    bad = Calibrator.from_dict(json.loads(json.dumps({**doc, "state": None})))
    assert bad.n_classes_ is None
    _one_line_error(_write(path, doc), "must be > 0")


@pytest.mark.parametrize(
    "content, match",
    [
        ("[]", "must hold a JSON object .* got list"),
        ("null", "must hold a JSON object .* got null"),
        ('"ts"', "must hold a JSON object .* got str"),
        ('{"method": "ts", "params": [], "state": null}', "params must be an object"),
        ('{"method": "ts", "params": {}, "state": []}', "state must be an object or null"),
        ('{"method": 3, "params": {}, "state": null}', "unknown calibrator method 3"),
        (
            '{"method": "ts", "params": {}, "state": {"n_classes": "4", "a": 1}}',
            "n_classes must be an integer",
        ),
        (
            '{"method": "ts", "params": {}, "state": {"n_classes": 4, "a": {"__ndarray__": [1], "dtype": "nope"}}}',
            "state.a is not a stored array",
        ),
        ('{"method": "ts", "params": {}, "state": null, "fitted_on": 3}', "fitted_on must hold"),
        ('{"method": "ts", "parms": {}}', r"unknown top-level key\(s\) \['parms'\]"),
        ('{"method"', "not valid calibrator JSON"),
    ],
)
def test_malformed_json_is_one_line_error(tmp_path, content, match):
    path = tmp_path / "c.json"
    try:
        doc = json.loads(content)
    except json.JSONDecodeError:
        doc = None
    path.write_text(sealed_text(doc) if isinstance(doc, dict) else content)
    _one_line_error(path, match)


@pytest.mark.parametrize("name", OURS)
def test_fit_refuses_probabilities_unless_allowed(name, small_problem):
    z, y = _problem(name, small_problem)
    probs = np.exp(z - z.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    cal = get_calibrator(name, **_fast_params(name))
    with pytest.raises(
        ValueError, match="fit got probabilities .* allow_probabilities=True"
    ) as exc:
        cal.fit(probs, y)
    assert "\n" not in str(exc.value) and cal.n_classes_ is None
    cal.fit(probs, y, allow_probabilities=True)
    assert cal.n_classes_ == z.shape[1]


def test_ts_on_probabilities_would_fit_a_wrong_temperature(small_problem):
    """Why the check exists: TS fitted on probabilities gives a very different T."""
    z, y = small_problem
    probs = np.exp(z - z.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    t_logits = get_calibrator("ts", device="cpu").fit(z, y).temperature_
    t_probs = (
        get_calibrator("ts", device="cpu").fit(probs, y, allow_probabilities=True).temperature_
    )
    assert abs(t_logits - t_probs) > 0.5 * t_logits


def test_logits_that_merely_are_positive_are_accepted(small_problem):
    z, y = small_problem
    get_calibrator("ts", device="cpu").fit(z - z.min() + 0.1, y)  # positive, rows not summing to 1


def test_fitted_on_round_trips_and_is_checked(small_problem, tmp_path):
    z, y = small_problem
    cal = get_calibrator("ts", device="cpu").fit(z, y)
    cal.set_fitted_on("o" * 64, "f" * 64)
    save_calibrator(cal, tmp_path / "ts.json")
    back = load_calibrator(tmp_path / "ts.json")
    assert back.fitted_on_ == {"order_hash": "o" * 64, "logits_sha256": "f" * 64}
    back.check_fitted_on("o" * 64, "f" * 64)
    with pytest.raises(ValueError, match="fitted on another logits file .* --allow-other-logits"):
        back.check_fitted_on("o" * 64, "e" * 64, where="ts.json")
    with pytest.raises(ValueError, match="fitted on logits of other samples"):
        back.check_fitted_on("x" * 64, "f" * 64)
    cal.fit(z, y)  # a refit forgets the old identity
    assert cal.fitted_on_ is None and "fitted_on" not in cal.to_dict()
