"""Agreement with the replicated study's computation on identical float32 logits.

The study (Vasilev, MSU 2021, ``calib/``) computes every probability with
``scipy.special.softmax`` on float32 logits (float32 results), fits histogram binning and
scikit-learn's isotonic regression one-vs-rest on those float32 columns, applies its scaling maps
in float32 numpy, and evaluates ACC / ECE / MCE / cwECE (15 bins ``[a, b)``, last edge 1 + 1e-10)
/ Brier / NLL (scikit-learn 2021 ``log_loss``: clip to [1e-15, 1 - 1e-15], renormalise) on the
resulting arrays.  The functions below rebuild that computation from its definition with numpy,
scipy, scikit-learn and torch, independently of calbench's implementation, and the tests pin
calbench's ``precision="float32"`` calibrators and its metrics to it.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special
from sklearn.isotonic import IsotonicRegression
from sklearn.model_selection import train_test_split

from calbench.calibrators import get_calibrator
from calbench.calibrators.precision import softmax32
from calbench.metrics import METRICS

STUDY_METRICS = ("accuracy", "ece", "mce", "cwece", "brier", "nll")


# --- the study's computation, rebuilt ------------------------------------------------------------
def study_bins(conf, target, n_bins=15):
    edges = np.linspace(0, 1, n_bins + 1)
    edges[-1] = 1 + 1e-10
    idx = np.digitize(conf, edges) - 1
    total = np.bincount(idx, minlength=n_bins)
    mean_conf = np.bincount(idx, weights=conf, minlength=n_bins)
    mean_acc = np.bincount(idx, weights=target, minlength=n_bins).astype(np.float64)
    np.divide(mean_conf, total, out=mean_conf, where=total != 0)
    np.divide(mean_acc, total, out=mean_acc, where=total != 0)
    return mean_conf, mean_acc, total / total.sum()


def study_metrics(probs, y):
    conf, acc, w = study_bins(probs.max(axis=1), (probs.argmax(axis=1) == y).astype(float))
    gaps = np.abs(conf - acc)
    cw = []
    for j in range(probs.shape[1]):
        c_j, a_j, w_j = study_bins(probs[:, j], (y == j).astype(float))
        cw.append(np.average(np.abs(c_j - a_j), weights=w_j))
    onehot = np.zeros_like(probs)  # the study's Brier keeps the probabilities' dtype
    onehot[np.arange(len(y)), y] = 1
    # scikit-learn <= 1.0 log_loss: clip in the input dtype, renormalise, log, sum with 0/1 ints
    q = np.clip(probs, 1e-15, 1 - 1e-15)
    q /= q.sum(axis=1)[:, None]
    labels = np.eye(probs.shape[1], dtype=np.int64)[y]
    return {
        "accuracy": float(np.mean(probs.argmax(axis=1) == y)),
        "ece": float(np.average(gaps, weights=w)),
        "mce": float(gaps.max()),
        "cwece": float(np.mean(cw)),
        "brier": float(((onehot - probs) ** 2).sum(axis=1).mean()),
        "nll": float(np.mean(-(labels * np.log(q)).sum(axis=1))),
    }


def study_hist(pv, yv, pt, n_bins=20):
    edges = np.linspace(0, 1, n_bins + 1)
    edges[-1] += 1e-10
    centres = (edges[:-1] + edges[1:]) * 0.5
    cols = []
    for j in range(pv.shape[1]):
        _, theta, w = study_bins(pv[:, j], (yv == j).astype(int), n_bins)
        theta[w == 0] = centres[w == 0]
        cols.append(theta[np.digitize(pt[:, j], edges) - 1])
    out = np.stack(cols, axis=1)
    out /= out.sum(axis=1, keepdims=True)
    return out


def study_iso(pv, yv, pt):
    cols = []
    for j in range(pv.shape[1]):
        reg = IsotonicRegression(increasing=True, out_of_bounds="clip", y_min=0.0, y_max=1.0)
        reg.fit(pv[:, j], (yv == j).astype(int))
        cols.append(reg.transform(pt[:, j]))
    out = np.stack(cols, axis=1)
    out /= out.sum(axis=1, keepdims=True)
    return out


def study_scaling(zv, yv, zt, kind):
    """The study's LogitScaling: float32 torch LBFGS(lr=1, max_iter=1000), then float32 numpy."""
    import torch

    z = torch.from_numpy(zv)
    t = torch.from_numpy(yv.astype(np.int64))
    k = zv.shape[1]
    scale = {
        "ts": torch.tensor(1.0), "vs": torch.ones(k), "vs_b": torch.ones(k), "ms_b": torch.eye(k)
    }[kind].requires_grad_(True)
    params = [scale]
    if kind in ("vs_b", "ms_b"):
        bias = torch.zeros(k, requires_grad=True)
        params.append(bias)
    else:
        bias = torch.tensor(0.0)
    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=1000)

    def closure():
        opt.zero_grad()
        out = z @ scale + bias if kind == "ms_b" else z * scale + bias
        loss = torch.nn.functional.cross_entropy(out, t)
        loss.backward()
        return loss

    opt.step(closure)
    s, b = scale.detach().numpy(), bias.detach().numpy()
    g = zt @ s + b if kind == "ms_b" else zt * s + b
    return scipy.special.softmax(g, axis=1)


def make_logits(k, n=4000, seed=0, harsh=True):
    """Float32 logits split as the study splits them.  ``harsh``: over-confident (many top
    probabilities round to 1 in float32) with a quarter of the samples confidently wrong;
    otherwise a milder set on which unregularised LBFGS without line search converges."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    if harsh:
        sharp = rng.uniform(0.5, 3.0, (n, 1))
        z = rng.normal(0.0, 2.0, (n, k)) + 7.0 * sharp * np.eye(k)[y]
        flip = rng.random(n) < 0.25
        z[flip] = np.roll(z[flip], 1, axis=1)
    else:
        z = rng.normal(0.0, 1.0, (n, k)) + rng.uniform(1.0, 4.0, (n, 1)) * np.eye(k)[y]
    zv, zt, yv, yt = train_test_split(z.astype(np.float32), y, test_size=0.5, random_state=0)
    return zv, yv, zt, yt


def ours(name, zv, yv, zt, **params):
    if name in ("ts", "vs", "vs_b", "ms_b"):
        params["device"] = "cpu"
    return get_calibrator(name, precision="float32", **params).fit(zv, yv).predict_proba(zt)


def assert_metrics_agree(probs_ours, probs_study, y):
    want = study_metrics(probs_study, y)
    got = {m: METRICS[m](probs_ours, y) for m in STUDY_METRICS}
    for m in ("accuracy", "ece", "mce", "cwece"):
        assert got[m] == pytest.approx(want[m], rel=0, abs=1e-12), m
    # calbench accumulates Brier and NLL in float64; the study rounds every step to float32
    assert got["brier"] == pytest.approx(want["brier"], rel=2e-6), "brier"
    assert got["nll"] == pytest.approx(want["nll"], rel=2e-6), "nll"


# --- tests -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [10, 100])
def test_softmax32_is_scipy_softmax_bit_for_bit(k):
    z = np.random.default_rng(k).normal(0, 8, (500, k)).astype(np.float32)
    ref = scipy.special.softmax(z, axis=1)
    assert ref.dtype == np.float32
    np.testing.assert_array_equal(softmax32(z), ref)
    np.testing.assert_array_equal(ours("uncalibrated", z, np.zeros(500, int), z), ref)


def extreme_logits(n: int, k: int, dtype) -> np.ndarray:
    """Random logits with rows of extreme values: ties, +-3e38, huge gaps, one dominant class."""
    rng = np.random.default_rng(7)
    z = rng.normal(0, 30, (n, k)).astype(dtype)
    z[0] = 0.0  # all tied
    z[1] = np.finfo(np.float32).max  # all at the float32 maximum
    z[2, ::2], z[2, 1::2] = np.finfo(np.float32).max, -np.finfo(np.float32).max  # shift -> -inf
    z[3] = -1e30
    z[3, 5] = 1e30  # one class carries everything
    z[4] = rng.normal(0, 1e-6, k)  # nearly tied
    z[5] = np.arange(k) * 88.0  # exp underflows for all but the top few
    return z


def test_softmax32_is_scipy_softmax_bit_for_bit_on_a_large_array_with_extreme_logits():
    # odd sizes, so numpy's vectorised loops have remainders
    z = extreme_logits(2053, 1001, np.float32)
    keep = z.copy()
    with np.errstate(over="ignore"):  # row 2: max - (-max) overflows to inf, in scipy too
        ref = scipy.special.softmax(z, axis=1)
        got = softmax32(z)
        z64 = extreme_logits(2053, 1001, np.float64)
        ref64 = scipy.special.softmax(z64.astype(np.float32), axis=1)
        got64 = softmax32(z64)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(z, keep)  # the input is not modified
    np.testing.assert_array_equal(got64, ref64)
    np.testing.assert_array_equal(z64, extreme_logits(2053, 1001, np.float64))
    # a non-contiguous view and integer logits take the same route
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(
            softmax32(z[:, ::2]), scipy.special.softmax(z[:, ::2], axis=1)
        )
    zi = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(
        softmax32(zi), scipy.special.softmax(zi.astype(np.float32), axis=1)
    )


@pytest.mark.parametrize("k", [10, 100])
def test_binning_calibrators_equal_the_study(k):
    zv, yv, zt, yt = make_logits(k)
    pv, pt = scipy.special.softmax(zv, axis=1), scipy.special.softmax(zt, axis=1)
    hist = ours("hist", zv, yv, zt, n_bins=20)
    iso = ours("iso", zv, yv, zt)
    ref_hist, ref_iso = study_hist(pv, yv, pt), study_iso(pv, yv, pt)
    assert hist.dtype == ref_hist.dtype == np.float64
    assert iso.dtype == ref_iso.dtype == np.float32
    # an empty bin gets its centre: (m + 0.5) / M here, (e_m + e_{m+1}) / 2 in the study with the
    # last edge moved to 1 + 1e-10 (0.97500000005 for 20 bins), hence the 1e-10 tolerance
    np.testing.assert_allclose(hist, ref_hist, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(iso, ref_iso)
    assert_metrics_agree(hist, ref_hist, yt)
    assert_metrics_agree(iso, ref_iso, yt)
    assert_metrics_agree(ours("uncalibrated", zv, yv, zt), pt, yt)


@pytest.mark.parametrize("k", [10, 100])
@pytest.mark.parametrize("kind", ["ts", "vs", "vs_b", "ms_b"])
def test_scaling_calibrators_agree_with_the_study(k, kind):
    zv, yv, zt, yt = make_logits(k, n=2000 if kind == "ms_b" and k == 100 else 4000, harsh=False)
    got = ours(kind, zv, yv, zt)
    ref = study_scaling(zv, yv, zt, kind)
    assert got.dtype == ref.dtype == np.float32
    # same float32 LBFGS objective and steps; torch may order the gradient reductions of the
    # broadcast parameters differently, so allow float32 rounding of the fitted map
    np.testing.assert_allclose(got, ref, rtol=0, atol=2e-6)
    want, have = study_metrics(ref, yt), {m: METRICS[m](got, yt) for m in STUDY_METRICS}
    for m in STUDY_METRICS:
        assert have[m] == pytest.approx(want[m], rel=1e-5, abs=1e-6), m


def test_float64_default_is_what_the_option_is_needed_for():
    """Default float64 isotonic fits a visibly different map on the same logits."""
    zv, yv, zt, yt = make_logits(10)
    pv, pt = scipy.special.softmax(zv, axis=1), scipy.special.softmax(zt, axis=1)
    ref = study_iso(pv, yv, pt)
    default = get_calibrator("iso").fit(zv, yv).predict_proba(zt)
    assert default.dtype == np.float64
    assert np.abs(default - ref).max() > 1e-3
    assert abs(METRICS["nll"](default, yt) - METRICS["nll"](ref, yt)) > 1e-3


@pytest.mark.parametrize("name", ["uncalibrated", "hist", "iso", "bbq", "ts", "ms_b", "dirichlet"])
def test_precision_round_trips_and_rejects_unknown_values(name):
    from calbench.calibrators import Calibrator

    zv, yv, zt, _ = make_logits(10, n=600, harsh=False)
    params = {"device": "cpu"} if name in ("ts", "ms_b", "dirichlet") else {}
    cal = get_calibrator(name, precision="float32", **params).fit(zv, yv)
    back = Calibrator.from_dict(cal.to_dict())
    assert back.get_params()["precision"] == "float32"
    np.testing.assert_array_equal(back.predict_proba(zt), cal.predict_proba(zt))
    with pytest.raises(ValueError, match="precision must be one of"):
        get_calibrator(name, precision="half")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_isotonic_fit_pools_near_ties_as_scikit_learn(dtype, seed):
    """Scores in chains closer than the dtype's resolution (1e-6 / 1e-15) pool into the groups
    scikit-learn's left-to-right rule forms, also where the fast path must cut the column."""
    from calbench.calibrators.isotonic import apply_isotonic, apply_isotonic_float32, fit_isotonic

    rng = np.random.default_rng(seed)
    eps = float(np.finfo(dtype).resolution)
    n, k = 3000, 4
    labels = rng.integers(0, k, n)
    base = rng.choice([0.05, 0.1, 0.3, 0.3 + 3 * eps], size=(n, k))
    base[np.arange(n), labels] = rng.choice([0.6, 0.95], size=n)
    probs = (base + rng.integers(0, 6, (n, k)) * 0.3 * eps).astype(dtype)  # linked chains
    # every positive of a class scores >= 0.6: the fit cuts off the chains below (the fast path),
    # here where a chain straddles the cut, so the cut moves to the chain's first group start
    queries = np.concatenate([probs, rng.random((500, k)).astype(dtype)])
    kx, ky, off = fit_isotonic(probs, labels)
    apply = apply_isotonic_float32 if dtype == np.float32 else apply_isotonic
    got = apply(kx, ky, off, queries)
    for j in range(k):
        reg = IsotonicRegression(increasing=True, out_of_bounds="clip", y_min=0.0, y_max=1.0)
        reg.fit(probs[:, j], (labels == j).astype(int))
        want = reg.transform(queries[:, j])
        if dtype == np.float32:
            np.testing.assert_array_equal(got[:, j], want)
        else:
            np.testing.assert_allclose(got[:, j], want, rtol=0, atol=1e-12)
