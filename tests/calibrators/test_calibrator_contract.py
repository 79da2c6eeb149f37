"""Contract every registered calibrator honours: shapes, rows summing to 1, JSON round trip,
one-line ValueErrors on bad input."""

import json

import numpy as np
import pytest

import calbench.calibrators as cal
from calbench.calibrators import REGISTRY, get_calibrator, load_calibrator, save_calibrator

ALL = [
    "uncalibrated", "ts", "vs", "vs_b", "ms_b", "ts_sbece",
    "hist", "iso", "bbq", "platt", "dirichlet", "dir_odir_cv", "ms_odir_cv", "dir_l2_cv",
    "beta", "venn_abers", "ets", "cir", "svs", "sms", "spline",
]  # fmt: skip


def _problem(name, small_problem):
    z, y = small_problem
    if name == "platt":  # binary only
        return z[:, :2], (y % 2).astype(np.int64)
    return z, y


def _fast(name):
    kw = {"device": "cpu"} if name in ("ts", "vs", "vs_b", "ms_b", "dirichlet", "ts_sbece") else {}
    if name == "ts_sbece":
        kw["n_steps"] = 30
    if name in ("dir_odir_cv", "ms_odir_cv"):  # a 2-pair grid instead of Kull et al.'s 432
        kw.update(device="cpu", lambdas=[1e-3], mus=[1e-3, 1.0])
    if name == "dir_l2_cv":
        kw.update(device="cpu", lambdas=[1e-3, 1.0])
    return get_calibrator(name, **kw)


def test_registry_is_complete_and_exported():
    # plug-ins (calbench.plugins: adapters, entry points) join REGISTRY when first used
    builtins = {
        n: c for n, c in REGISTRY.items() if c.__module__.startswith("calbench.calibrators.")
    }
    assert sorted(builtins) == sorted(ALL)
    for name, cls in builtins.items():
        assert getattr(cal, cls.__name__) is cls
        assert cls.name == name


@pytest.mark.parametrize("name", ALL)
def test_shape_rows_and_bit_exact_json_round_trip(name, small_problem, tmp_path):
    z, y = _problem(name, small_problem)
    c = _fast(name).fit(z[:200], y[:200])
    p = c.predict_proba(z[200:])
    assert p.shape == (100, z.shape[1])
    assert np.all(np.isfinite(p)) and p.min() >= 0 and p.max() <= 1
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    text = json.dumps(c.to_dict(), allow_nan=False)
    back = type(c).from_dict(json.loads(text))
    assert np.array_equal(back.predict_proba(z[200:]), p)
    save_calibrator(c, tmp_path / "c.json")
    assert np.array_equal(load_calibrator(tmp_path / "c.json").predict_proba(z[200:]), p)
    # float64 logits give the same calibrated probabilities up to float32 rounding of the input
    np.testing.assert_allclose(c.predict_proba(z[200:].astype(np.float64)), p, atol=1e-12)


@pytest.mark.parametrize("name", ALL)
def test_bad_input_raises_one_line_value_error(name, small_problem):
    z, y = _problem(name, small_problem)
    c = _fast(name)
    with pytest.raises(ValueError, match="not fitted"):
        c.predict_proba(z)
    bad = z.astype(np.float64).copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        c.fit(bad, y)
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        c.fit(bad, y)
    with pytest.raises(ValueError, match="must lie in"):
        c.fit(z, np.where(y == 0, z.shape[1], y))
    with pytest.raises(ValueError, match="must lie in"):
        c.fit(z, np.where(y == 0, -1, y))
    c.fit(z, y)
    wrong_k = np.concatenate([z, z[:, :1]], axis=1)
    with pytest.raises(ValueError, match="classes") as err:
        c.predict_proba(wrong_k)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="NaN or infinite"):
        c.predict_proba(bad)
