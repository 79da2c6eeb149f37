"""Every calibrator and every metric accepts arrays of any layout and dtype.

One property, checked for each entry of ``calbench.calibrators.REGISTRY`` and
``calbench.metrics.METRICS`` (a new calibrator or metric is covered without editing this file):
the answer for Fortran-ordered arrays, strided (non-contiguous) slices, float16/32/64 inputs, any
integer label dtype (int8 .. uint64), NumPy arrays and torch tensors (``requires_grad`` or not)
equals the answer for the same values as a C-ordered float64 array with int64 labels, within a
tolerance scaled to the input dtype's precision.
"""

import warnings

import numpy as np
import pytest
import torch

from calbench.calibrators import REGISTRY, get_calibrator
from calbench.metrics import METRICS

N = 90
LABEL_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
#: cheap hyperparameters for the calibrators whose defaults are slow (grids, long optimisations)
CHEAP = {
    "ts_sbece": {"n_steps": 5},
    "dir_odir_cv": {"lambdas": [1e-3], "mus": [1e-3], "n_folds": 2, "max_iter": 30},
    "ms_odir_cv": {"lambdas": [1e-3], "mus": [1e-3], "n_folds": 2, "max_iter": 30},
    "dir_l2_cv": {"lambdas": [1e-3], "n_folds": 2, "max_iter": 30},
}
#: relative tolerance per input float dtype: the input is the same, only the arithmetic differs
RTOL = {np.float64: 1e-9, np.float32: 2e-3, np.float16: 2e-3}


def _problem(k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(N, k)) * 2.0
    y = (np.argmax(z + rng.normal(size=(N, k)) * 2.0, axis=1)).astype(np.int64)
    return z, y


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _layouts(x: np.ndarray):
    """The same values as a Fortran-ordered array and as a strided view of a larger array."""
    big = np.zeros((2 * x.shape[0], 3 * x.shape[1]), dtype=x.dtype)
    big[::2, ::3] = x
    view = big[::2, ::3]
    assert not view.flags.c_contiguous and not view.flags.f_contiguous
    return {"fortran": np.asfortranarray(x), "strided": view}


def _variants(x: np.ndarray, y: np.ndarray):
    """``(label, x_variant, y_variant, float dtype of the values)``: for float64 ``x`` every
    layout, label dtype and container; for float32 / float16 ``x`` the array itself and its
    torch tensor (the dtype is what is under test)."""
    dt = x.dtype.type
    if dt is not np.float64:
        t = torch.tensor(x, requires_grad=dt is not np.float16)
        return [(dt.__name__, x, y, dt), (f"torch {dt.__name__}", t, torch.tensor(y), dt)]
    out = [(name, v, y, x.dtype.type) for name, v in _layouts(x).items()]
    out += [(f"labels {d.__name__}", x, y.astype(d), x.dtype.type) for d in LABEL_DTYPES]
    ystrided = np.repeat(y, 2)[::2]
    out.append(("strided labels", x, ystrided, x.dtype.type))
    t = torch.tensor(x, requires_grad=True)
    out.append(("torch requires_grad", t, torch.tensor(y), x.dtype.type))
    out.append(("torch", torch.tensor(x), torch.tensor(y, dtype=torch.int32), x.dtype.type))
    return out


def _calibrator(name: str):
    params = dict(CHEAP.get(name, {}))
    if "device" in REGISTRY[name].accepted_params():
        params["device"] = "cpu"
    return get_calibrator(name, **params)


def _fit_predict(name: str, z, y, zt):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few-samples warnings of the cheap problem
        return _calibrator(name).fit(z, y).predict_proba(zt)


def _classes_for(name: str) -> int:
    """3 classes, or 2 for calibrators that refuse more (binary-only)."""
    z, y = _problem(3)
    try:
        _fit_predict(name, z, y, z)
    except ValueError:
        return 2
    return 3


@pytest.mark.parametrize("name", sorted(REGISTRY))
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_calibrator_answer_does_not_depend_on_layout_or_dtype(name, dtype):
    k = _classes_for(name)
    z, y = _problem(k)
    z = z.astype(dtype)  # the values every variant holds
    ref = _fit_predict(name, z.astype(np.float64), y, z.astype(np.float64))
    for label, zv, yv, dt in _variants(z, y):
        got = _fit_predict(name, zv, yv, zv)
        assert got.shape == ref.shape, label
        assert np.all(np.isfinite(got)), label
        # the calibrated probabilities of the C-ordered float64 fit, for the variant's values
        np.testing.assert_allclose(
            got, ref, rtol=RTOL[dt], atol=RTOL[dt], err_msg=f"{name}: {label} ({dtype.__name__})"
        )


@pytest.mark.parametrize("name", sorted(METRICS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_metric_answer_does_not_depend_on_layout_or_dtype(name, dtype):
    z, y = _problem(4, seed=1)
    # probabilities on a 1/1024 grid: exact in float16, float32 and float64, rows sum to 1
    counts = np.floor(_softmax(z) * 1024).astype(np.int64)
    counts[np.arange(N), counts.argmax(axis=1)] += 1024 - counts.sum(axis=1)
    p = (counts / 1024).astype(dtype)
    ref = float(METRICS[name](p.astype(np.float64), y))
    assert np.isfinite(ref)
    for label, pv, yv, dt in _variants(p, y):
        got = float(METRICS[name](pv, yv))
        np.testing.assert_allclose(
            got,
            ref,
            rtol=RTOL[dt],
            atol=RTOL[dt] * 1e-2,
            err_msg=f"{name}: {label} ({dtype.__name__})",
        )


def test_float16_probabilities_pass_the_row_sum_check_only_within_their_precision():
    from calbench._checks import check_probs

    p = _softmax(_problem(10)[0]).astype(np.float16)
    dev = np.abs(p.astype(np.float64).sum(axis=1) - 1.0).max()
    assert 1e-4 < dev < 2e-3  # the case at hand: beyond the float32/64 tolerance
    check_probs(p)  # rounding to float16 moves row sums by up to ~5e-4: accepted
    bad = p.astype(np.float64)
    bad[0, 0] += 0.01  # far beyond float16 rounding: refused in every dtype
    for d in (np.float16, np.float32, np.float64):
        with pytest.raises(ValueError, match="rows must sum to 1"):
            check_probs(bad.astype(d))


def test_uint64_labels_beyond_int64_are_refused_not_wrapped():
    from calbench._checks import check_labels

    y = np.array([0, 2**63 + 1], dtype=np.uint64)
    with pytest.raises(ValueError, match="must lie in"):
        check_labels(y, 2, 3)
