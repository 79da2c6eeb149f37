"""Temperature / vector / matrix scaling: known temperature recovered, argmax kept, agreement with
an independent scipy fit of the same objective, dtype and regularisation options."""

import numpy as np
import pytest

from calbench.calibrators.scaling import (
    PARAMETERISATIONS,
    MatrixScalingBias,
    TemperatureScaling,
    VectorScaling,
    VectorScalingBias,
    apply_scaling,
    init_params,
)
from conftest import sample_labels, softmax64

CLASSES = {"ts": TemperatureScaling, "vs": VectorScaling, "vs_b": VectorScalingBias,
           "ms_b": MatrixScalingBias}  # fmt: skip


def nll(probs, y):
    return float(-np.mean(np.log(probs[np.arange(len(y)), y])))


def test_ts_recovers_known_temperature_and_keeps_argmax():
    # labels drawn from softmax(z / T*): the NLL minimiser converges to T* (MLE, N = 10000).
    # Standard error of T-hat here is ~1 %; tolerance 3 %.
    rng = np.random.default_rng(0)
    t_star = 2.0
    z = rng.normal(size=(10000, 10)) * 4.0
    y = sample_labels(rng, softmax64(z / t_star))
    ts = TemperatureScaling(device="cpu").fit(z.astype(np.float32), y)
    assert ts.temperature_ == pytest.approx(t_star, rel=0.03)
    assert ts.params_["a"].dtype == np.float32
    p = ts.predict_proba(z)
    assert np.array_equal(p.argmax(1), z.argmax(1))
    np.testing.assert_allclose(p, softmax64(z * np.float64(ts.params_["a"][0])), atol=1e-12)


def test_ts_inverse_temperature_below_one():
    rng = np.random.default_rng(1)
    z = rng.normal(size=(10000, 5))
    y = sample_labels(rng, softmax64(z / 0.5))  # under-confident logits: T* = 0.5
    assert TemperatureScaling(device="cpu").fit(z, y).temperature_ == pytest.approx(0.5, rel=0.03)


def test_parameterisation_table_initial_map_is_identity():
    z = np.random.default_rng(2).normal(size=(6, 3))
    for kind in PARAMETERISATIONS:
        np.testing.assert_array_equal(apply_scaling(z, init_params(kind, 3)), z)
    assert set(init_params("ms_b", 3)) == {"W", "b"}
    np.testing.assert_array_equal(init_params("ms_b", 3)["W"], np.eye(3))


def test_apply_scaling_by_hand():
    z = np.array([[1.0, 2.0], [3.0, -1.0]])
    assert np.allclose(apply_scaling(z, {"a": np.array([0.5])}), [[0.5, 1.0], [1.5, -0.5]])
    assert np.allclose(apply_scaling(z, {"v": np.array([2.0, 3.0]), "b": np.array([1.0, 0.0])}),
                       [[3.0, 6.0], [7.0, -3.0]])  # fmt: skip
    w = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert np.allclose(apply_scaling(z, {"W": w, "b": np.array([0.0, 10.0])}),
                       [[2.0, 11.0], [-1.0, 13.0]])  # fmt: skip


def _affine_data(kind, n, seed):
    """Logits z and labels drawn from softmax(g*(z)) for a known non-identity map g*."""
    rng = np.random.default_rng(seed)
    k = 3
    z = rng.normal(size=(n, k)) * 2
    true = {
        "ts": {"a": np.array([0.4])},
        "vs": {"v": np.array([0.3, 0.8, 0.5])},
        "vs_b": {"v": np.array([0.3, 0.8, 0.5]), "b": np.array([0.5, -0.5, 0.0])},
        "ms_b": {"W": np.array([[0.5, 0.2, 0.0], [0.1, 0.4, 0.0], [0.0, 0.2, 0.6]]),
                 "b": np.array([0.3, 0.0, -0.3])},
    }[kind]  # fmt: skip
    y = sample_labels(rng, softmax64(apply_scaling(z, true)))
    return z, y


def _scipy_fit(kind, z, y):
    """Independent float64 reference: scipy L-BFGS-B on the same mean cross-entropy."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp

    init = init_params(kind, z.shape[1])
    names = list(init)
    sizes = [init[n].size for n in names]

    def unpack(theta):
        out, i = {}, 0
        for n, s in zip(names, sizes, strict=True):
            out[n] = theta[i : i + s].reshape(init[n].shape)
            i += s
        return out

    def f(theta):
        g = apply_scaling(z, unpack(theta))
        return float(np.mean(logsumexp(g, axis=1) - g[np.arange(len(y)), y]))

    x0 = np.concatenate([init[n].ravel() for n in names])
    res = minimize(
        f, x0, method="L-BFGS-B", options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-10}
    )
    return softmax64(apply_scaling(z, unpack(res.x))), res.fun


@pytest.mark.parametrize("kind", ["ts", "vs", "vs_b", "ms_b"])
def test_matches_scipy_reference_and_improves_nll(kind):
    z, y = _affine_data(kind, 600, seed=3)
    ref_p, ref_nll = _scipy_fit(kind, z, y)
    c64 = CLASSES[kind](device="cpu", dtype="float64", line_search="strong_wolfe").fit(z, y)
    p64 = c64.predict_proba(z)
    assert nll(p64, y) == pytest.approx(ref_nll, abs=1e-7)
    np.testing.assert_allclose(
        p64, ref_p, atol=2e-4
    )  # predictions are unique even if params are not
    # study default: float32, no line search, one LBFGS step call
    c32 = CLASSES[kind](device="cpu").fit(z.astype(np.float32), y)
    assert all(v.dtype == np.float32 for v in c32.params_.values())
    assert all(v.dtype == np.float64 for v in c64.params_.values())
    assert nll(c32.predict_proba(z), y) == pytest.approx(ref_nll, abs=1e-4)
    assert nll(p64, y) < nll(softmax64(z), y) - 0.05


def test_vs_without_bias_has_no_bias_and_vs_b_does():
    z, y = _affine_data("vs_b", 400, seed=4)
    assert set(VectorScaling(device="cpu").fit(z, y).params_) == {"v"}
    assert set(VectorScalingBias(device="cpu").fit(z, y).params_) == {"v", "b"}


def test_l2_penalty_shrinks_towards_identity():
    z, y = _affine_data("ms_b", 400, seed=5)
    free = MatrixScalingBias(device="cpu", dtype="float64").fit(z, y).params_
    tied = MatrixScalingBias(device="cpu", dtype="float64", l2=10.0).fit(z, y).params_
    dev = lambda p: np.sum((p["W"] - np.eye(3)) ** 2) + np.sum(p["b"] ** 2)  # noqa: E731
    assert dev(tied) < 0.1 * dev(free)


def test_odir_penalises_off_diagonal_and_bias_only():
    z, y = _affine_data("ms_b", 400, seed=6)
    p = MatrixScalingBias(device="cpu", dtype="float64", odir=(1e4, 1e4)).fit(z, y).params_
    off = p["W"][~np.eye(3, dtype=bool)]
    assert np.abs(off).max() < 1e-2 and np.abs(p["b"]).max() < 1e-2
    assert np.abs(np.diag(p["W"]) - 1).max() > 0.1  # diagonal stays free


def test_options_are_validated():
    with pytest.raises(ValueError, match="line_search"):
        TemperatureScaling(line_search="armijo")
    with pytest.raises(ValueError, match="dtype"):
        TemperatureScaling(dtype="float16")
    with pytest.raises(ValueError, match="max_iter"):
        TemperatureScaling(max_iter=0)
    with pytest.raises(ValueError, match="l2"):
        VectorScaling(l2=-1.0)
    with pytest.raises(ValueError, match="odir"):
        MatrixScalingBias(odir=(1.0,))
    with pytest.raises(ValueError, match="not fitted"):
        _ = TemperatureScaling().temperature_


def test_cpu_fit_settings_are_scoped_and_restored():
    import torch

    from calbench.calibrators.fit_threads import SINGLE_THREAD_MAX_ENTRIES, cpu_fit_settings

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    tiny = torch.tensor([1e-40], dtype=torch.float32)  # a float32 denormal
    try:
        with cpu_fit_settings(SINGLE_THREAD_MAX_ENTRIES, "cpu"):
            assert torch.get_num_threads() == 1
            assert float(tiny * 1.0) == 0.0  # flushed to zero
        assert torch.get_num_threads() == 2
        assert float(tiny * 1.0) > 0.0
        with cpu_fit_settings(SINGLE_THREAD_MAX_ENTRIES + 1, "cpu", "ms_b", 1000) as data:
            # large problems: the optimiser on one thread, the data term on the caller's
            assert torch.get_num_threads() == 1 and data == 2
        with pytest.raises(RuntimeError), cpu_fit_settings(10, "cpu"):
            raise RuntimeError("boom")
        assert torch.get_num_threads() == 2 and float(tiny * 1.0) > 0.0
        with cpu_fit_settings(10, "cuda"):  # not a CPU fit: nothing changes
            assert torch.get_num_threads() == 2 and float(tiny * 1.0) > 0.0
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("kind", ["ts", "vs_b", "ms_b"])
def test_fit_settings_do_not_change_the_fitted_parameters(kind):
    # sharp logits (calibrated at scale 30): at the fitted map hundreds of float32 softmax
    # terms lie in the denormal range (log-probability between -103.9 and -87.3), which the
    # settings flush to zero; the study-default fit must come out identical
    import torch

    from calbench.calibrators.scaling import _fit_scaling, fit_scaling

    rng = np.random.default_rng(8)
    z = rng.normal(size=(600, 20)) * 30
    y = sample_labels(rng, softmax64(z))
    z = z.astype(np.float32)
    kw = {"max_iter": 1000, "line_search": None, "dtype": "float32", "l2": 0.0, "odir": None}
    fast = fit_scaling(z, y, kind, device="cpu", **kw)
    plain = _fit_scaling(z, y, kind, kw["max_iter"], None, "float32", "cpu", 0.0, None)
    assert fast.keys() == plain.keys()
    for name in fast:
        np.testing.assert_array_equal(fast[name], plain[name])
    params = {k: torch.from_numpy(v) for k, v in fast.items()}
    logp = torch.log_softmax(apply_scaling(torch.from_numpy(z), params), dim=1)
    assert int(((logp < -87.3) & (logp > -103.9)).sum()) > 100  # the case is really exercised


def test_ts_on_logits_that_do_not_predict_the_labels_is_an_error():
    """Signal-free logits give a <= 0 (T < 0 or infinite): a mismatch, reported at fit time,
    not a calibrator file that cannot be loaded later."""
    from calbench.calibrators import get_calibrator

    rng = np.random.default_rng(1)  # a = -0.025 for this draw
    z = rng.standard_normal((500, 10)).astype(np.float32)
    y = rng.integers(0, 10, 500)
    cal = get_calibrator("ts")
    with pytest.raises(ValueError, match=r"no positive temperature .* same order"):
        cal.fit(z, y)
    assert cal.params_ is None
    z[np.arange(500), y] += 1.0  # with signal: fits
    assert get_calibrator("ts").fit(z, y).temperature_ > 0
