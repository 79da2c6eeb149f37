"""The injectivity fact of every calibrator (Calibrator.injective, is_injective()), checked on
random logits: a calibrator found injective is a function of the model's probabilities and keeps
distinct ones distinct; for those that are not, the test finds a witness (two logits of the same
probabilities with different outputs, or two of different probabilities with the same output);
and the fitted-parameter conditions of the scaling family on hand-made parameters."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from test_calibrator_contract import ALL, _fast

from calbench.calibrators import get_calibrator
from calbench.calibrators.base import Calibrator
from calbench.calibrators.scaling import shift_subspace, softmax_affine_injective
from conftest import make_problem

#: declared not injective, and random logits show why (a witness is found)
WITNESSED = {"hist", "iso", "bbq", "venn_abers", "cir", "vs", "vs_b", "ms_b", "ms_odir_cv"}


@functools.cache
def _fitted(name):
    k = 2 if name == "platt" else 3
    z, y = make_problem(300, k, seed=1)
    return _fast(name).fit(z, y), k


def _witness(cal, k, seed=0):
    """Why ``cal``'s map is not an injective function of ``softmax(z)``, or ``None``."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(1000, k)) * 3.0
    p = cal.predict_proba(z)
    if np.max(np.abs(cal.predict_proba(z + 2.5) - p)) > 1e-6:
        return "shifted logits (same probabilities) give other outputs"
    near = z + 1e-3 * rng.normal(size=z.shape)
    if np.any(np.all(cal.predict_proba(near) == p, axis=1)):
        return "nearby logits give the same output"
    if np.unique(p, axis=0).shape[0] < p.shape[0]:
        return "distinct logits give the same output"
    return None


@pytest.mark.parametrize("name", ALL)
def test_declaration_against_random_logits(name):
    cal, k = _fitted(name)
    found = _witness(cal, k)
    if cal.is_injective():
        assert found is None, f"{name} is declared injective but {found}"
    else:
        assert not type(cal).injective, f"{name}: class says injective, instance does not"
    if name in WITNESSED:
        assert not cal.is_injective() and found is not None, name
    if type(cal).injective:
        assert cal.is_injective()


def test_which_builtins_are_injective_when_fitted():
    got = {n: _fitted(n)[0].is_injective() for n in ALL}
    # always: the identity and the temperature family; by their fitted parameters here: ETS
    # (w1 + w2 > 0), Platt (a != 0), Dirichlet and structured scaling (u of one sign)
    assert {n for n, v in got.items() if v} >= {"uncalibrated", "ts", "ts_sbece", "ets", "platt"}
    assert not {n for n, v in got.items() if v} & WITNESSED


def test_unfitted_is_an_error_and_plugins_default_to_not_injective():
    with pytest.raises(ValueError, match="not fitted") as info:
        get_calibrator("hist").is_injective()
    assert "\n" not in str(info.value)

    class Plugin(Calibrator):
        name = ""
        state_schema: dict = {}

        def _fit(self, z, y):
            pass

        def _predict_proba(self, z):
            e = np.exp(z - z.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)

    z, y = make_problem(50, 3)
    assert Plugin.injective is False and Plugin().fit(z, y).is_injective() is False


def _set(cal, **params):
    cal.params_ = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
    return cal


def test_scaling_conditions_on_hand_made_parameters():
    z, y = make_problem(100, 3)
    vs = get_calibrator("vs", device="cpu").fit(z, y)
    assert _set(vs, v=[2.0, 2.0, 2.0]).is_injective()  # temperature scaling in disguise
    assert not _set(vs, v=[1.0, 2.0, 3.0]).is_injective()
    assert _witness(vs, 3) == "shifted logits (same probabilities) give other outputs"
    ms = get_calibrator("ms_b", device="cpu").fit(z, y)
    equal_sums = np.array([[2.0, 0.0, 1.0], [0.0, 2.0, 0.0], [1.0, 1.0, 2.0]])  # sums 3, 3, 3
    assert _set(ms, W=equal_sums, b=[0.1, 0.0, -0.2]).is_injective()
    assert _witness(ms, 3) is None
    assert not _set(ms, W=equal_sums + np.diag([0.0, 0.0, 1.0]), b=[0, 0, 0]).is_injective()
    assert not _set(ms, W=np.ones((3, 3)), b=[0, 0, 0]).is_injective()  # a constant map
    ts = get_calibrator("ts", device="cpu").fit(z, y)
    assert ts.is_injective() and ts.linear_part() == pytest.approx(ts.params_["a"][0] * np.eye(3))


def test_dirichlet_collision_where_the_condition_fails():
    # W = diag(1, -1, 2): u = 1 @ inv(W) = (1, -1, 0.5) has both signs, so q and
    # p = q exp(mu u) (mu != 0 with sum p = 1) collide: log p @ W = log q @ W + mu (1, 1, 1)
    from scipy.optimize import brentq

    z, y = make_problem(100, 3)
    d = get_calibrator("dirichlet", device="cpu").fit(z, y)
    _set(d, W=np.diag([1.0, -1.0, 2.0]), b=[0.0, 0.3, 0.0])
    assert not d.is_injective()
    u, q = np.array([1.0, -1.0, 0.5]), np.array([0.5, 0.2, 0.3])
    mu = brentq(lambda m: np.sum(q * np.exp(m * u)) - 1.0, -20.0, -1e-3)
    p = q * np.exp(mu * u)
    assert np.max(np.abs(p - q)) > 0.05
    out = d.predict_proba(np.log(np.stack([p, q])))
    np.testing.assert_allclose(out[0], out[1], atol=1e-12)
    # entries of one sign: injective, and no witness on random logits
    assert _set(d, W=np.diag([1.0, 3.0, 2.0]), b=[0.0, 0.0, 0.0]).is_injective()
    assert _witness(d, 3) is None


def test_shift_subspace_and_the_log_probability_condition():
    np.testing.assert_allclose(np.abs(shift_subspace(np.eye(3))), np.full((1, 3), 3**-0.5))
    assert shift_subspace(np.zeros((3, 3))).shape[0] == 3
    assert softmax_affine_injective(np.diag([1.0, 2.0, 0.5]), "log_probs")
    assert not softmax_affine_injective(np.diag([1.0, 2.0, 0.5]), "logits")
    with pytest.raises(ValueError, match="features must be"):
        softmax_affine_injective(np.eye(2), "probs")


def test_other_fitted_conditions():
    z2, y2 = make_problem(200, 2)
    platt = get_calibrator("platt").fit(z2, y2)
    assert platt.is_injective()
    platt.coef_ = 0.0
    assert not platt.is_injective()
    beta = get_calibrator("beta").fit(z2, y2)
    beta.coef_ = np.array([[1.0, 0.5, 0.0]])
    assert beta.is_injective()
    beta.coef_ = np.array([[2.0, -1.0, 0.0]])  # mu rises then falls: not injective
    s = np.array([0.2, 0.8])  # a / s + b / (1 - s) changes sign between these
    assert not beta.is_injective()
    assert np.sign(2 / s - 1 / (1 - s)).tolist() == [1.0, -1.0]
    z3, y3 = make_problem(200, 3)
    assert not get_calibrator("beta").fit(z3, y3).is_injective()  # K > 2: not shown
    ets = get_calibrator("ets").fit(z3, y3)
    ets.weights_ = np.array([0.0, 0.0, 1.0])  # uniform: constant
    assert not ets.is_injective() and _witness(ets, 3) is not None
    ets.weights_ = np.array([0.3, 0.0, 0.7])
    assert ets.is_injective() and _witness(ets, 3) is None
