"""Divergence guard (calbench.calibrators.fit_guard): fits on logits up to |z| = 1,000.

One well-behaved over-confident 10-class set (labels drawn at temperature 2) is rescaled so that
its largest |logit| is 10, 57, 100 or 1,000.  The NLL-optimal temperature scales with the logits
and every optimum is the same map of the rescaled logits, so each calibrator must reach the same
validation NLL at every scale.  LBFGS without a line search (the replicated study's protocol,
the scaling family's default) diverged from |z| = 57 on: ts returned T ~ 1e-4 (NLL 392 instead
of 1.65), vs / vs_b / ms_b non-finite parameters, ts_sbece inherited ts's temperature; svs / sms
lost most classes' log-probabilities to a float32 clip at |z| = 1,000 (NLL 1.86); ets stopped at
the end of its temperature range without a word.  Each test names the reference it checks
against: a golden-section search over log T, an independent scipy L-BFGS-B fit in float64.
"""

import functools
import warnings

import numpy as np
import pytest

from calbench.calibrators import get_calibrator
from calbench.calibrators import scaling as scaling_module
from calbench.calibrators.ets import T_BOUNDS, _loss
from calbench.calibrators.fit_guard import FitGuardWarning
from calbench.functional import log_softmax, softmax
from calbench.metrics import ece
from calbench.metrics.soft import sb_ece
from conftest import make_problem

SCALES = (10, 57, 100, 1000)
N = 1500
#: slack on test ECE against the uncalibrated logits (sampling noise of ECE at 1,500 samples)
ECE_NOISE = 0.02


def nll(probs, y):
    return float(-np.mean(np.log(np.clip(probs[np.arange(y.size), y], 1e-300, None))))


def nll_of_logits(g, y):
    ls = log_softmax(np.asarray(g, dtype=np.float64))
    return float(-ls[np.arange(y.size), y].mean())


@functools.cache
def data(scale):
    """(val logits, val labels, test logits, test labels): float32 logits, max |z| = scale."""
    z, y = make_problem(2 * N, 10, seed=0)
    z = (z * (scale / np.abs(z).max())).astype(np.float32)
    return z[:N], y[:N], z[N:], y[N:]


@functools.cache
def ts_reference(scale):
    """(log T, NLL) of the NLL-optimal temperature on the validation half of ``data(scale)``."""
    zv, yv, _, _ = data(scale)
    return golden_log_t(zv, yv)


def golden_log_t(z, y, lo=-12.0, hi=12.0, iters=80):
    """Brute-force reference: golden-section search of the float64 NLL over log T (80 steps
    shrink the bracket by 0.618^80, below 1e-16 of its width)."""
    f = lambda s: nll_of_logits(np.asarray(z, np.float64) / np.exp(s), y)  # noqa: E731
    r = (np.sqrt(5.0) - 1) / 2
    grid = np.linspace(lo, hi, 97)  # bracket the (convex) minimum first
    i = int(np.argmin([f(s) for s in grid]))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    for _ in range(iters):
        c, d = b - r * (b - a), a + r * (b - a)
        if f(c) < f(d):
            b = d
        else:
            a = c
    return 0.5 * (a + b), f(0.5 * (a + b))


def scipy_reference(x, y, kind, odir=None):
    """Independent float64 fit of the scaling objective (scipy L-BFGS-B, analytic gradient):
    ``kind`` in vs, vs_b, ms_b; ``odir=(lambda, mu)`` adds Kull et al.'s normalised penalty."""
    from scipy.optimize import minimize

    x = np.asarray(x, dtype=np.float64)
    n, k = x.shape
    onehot = np.eye(k)[y]
    off = 1.0 - np.eye(k)

    def unpack(theta):
        if kind == "ms_b":
            return theta[: k * k].reshape(k, k), theta[k * k :]
        return theta[:k], theta[k:] if kind == "vs_b" else np.zeros(k)

    def fun(theta):
        m, b = unpack(theta)
        g = (x @ m if kind == "ms_b" else x * m) + b
        ls = log_softmax(g)
        r = (np.exp(ls) - onehot) / n
        loss = -float((ls * onehot).sum()) / n
        gm = x.T @ r if kind == "ms_b" else (r * x).sum(0)
        gb = r.sum(0)
        if odir is not None:
            lam, mu = odir
            loss += lam / (k * (k - 1)) * float(((m * off) ** 2).sum()) + mu / k * float(b @ b)
            gm = gm + 2 * lam / (k * (k - 1)) * m * off
            gb = gb + 2 * mu / k * b
        grad = np.concatenate([gm.ravel(), gb] if kind != "vs" else [gm])
        return loss, grad

    theta0 = np.concatenate(
        [np.eye(k).ravel(), np.zeros(k)] if kind == "ms_b"
        else [np.ones(k)] + ([np.zeros(k)] if kind == "vs_b" else [])
    )  # fmt: skip
    res = minimize(fun, theta0, jac=True, method="L-BFGS-B",
                   options={"maxiter": 50000, "maxcor": 30, "ftol": 0.0, "gtol": 1e-9})  # fmt: skip
    return res.fun


def fit(name, zv, yv, **params):
    """Fit ``name``; returns (calibrator, FitGuardWarnings seen)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", FitGuardWarning)
        cal = get_calibrator(name, **params).fit(zv, yv)
    return cal, [str(w.message) for w in seen if issubclass(w.category, FitGuardWarning)]


def assert_test_ece_not_worse(cal, zt, yt):
    before, after = ece(softmax(np.asarray(zt, np.float64)), yt), ece(cal.predict_proba(zt), yt)
    assert after <= before + ECE_NOISE, (before, after)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ts_reaches_the_brute_force_temperature(scale, dtype):
    zv, yv, zt, yt = data(scale)
    cal, notes = fit("ts", zv, yv, device="cpu", dtype=dtype)
    log_t, best = ts_reference(scale)
    fitted = nll(cal.predict_proba(zv), yv)
    assert fitted <= nll_of_logits(zv, yv) + 1e-9  # never worse than T = 1
    assert fitted <= best + 1e-5
    assert np.log(cal.temperature_) == pytest.approx(log_t, abs=1e-3)
    assert_test_ece_not_worse(cal, zt, yt)
    # the study's float32 arithmetic on the fitted map gives the same probabilities
    study = get_calibrator("ts", precision="float32")
    study.params_, study.n_classes_ = cal.params_, cal.n_classes_
    assert nll(study.predict_proba(zv), yv) == pytest.approx(fitted, abs=1e-4)
    # a refit is said, on stderr and on the object, as what happened
    assert len(notes) <= 1 and (notes == [cal.fit_note_] if notes else cal.fit_note_ is None)
    if notes:
        assert notes[0].startswith("ts: LBFGS without line search diverged (NLL ")
        assert "at T=1); refitted with strong-Wolfe line search in float64" in notes[0]


def test_ts_refits_at_57_as_the_issue_reports():
    zv, yv, _, _ = data(57)
    cal, notes = fit("ts", zv, yv, device="cpu")
    assert len(notes) == 1 and cal.fit_note_ == notes[0]
    assert cal.temperature_ > 1.0


@pytest.mark.parametrize("scale", SCALES)
def test_ts_sbece_never_above_its_start_and_near_its_grid_optimum(scale):
    zv, yv, zt, yt = data(scale)
    cal, _ = fit("ts_sbece", zv, yv, device="cpu", n_steps=60, lr=0.05)
    obj = lambda t: sb_ece(softmax(np.asarray(zv, np.float64) / t), yv, n_bins=15,  # noqa: E731
                           temperature=1e-3, p=2)  # fmt: skip
    assert obj(cal.temperature_) <= obj(1.0) + 1e-9
    log_t, _ = ts_reference(scale)
    assert np.log(cal.nll_temperature_) == pytest.approx(log_t, abs=1e-3)
    grid = np.exp(log_t + np.linspace(-0.4, 0.4, 41))
    assert obj(cal.temperature_) <= min(obj(t) for t in grid) + 2e-3
    assert_test_ece_not_worse(cal, zt, yt)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", ["vs", "vs_b", "ms_b"])
def test_vector_and_matrix_scaling_reach_the_scipy_optimum(name, scale):
    zv, yv, zt, yt = data(scale)
    cal, notes = fit(name, zv, yv, device="cpu")
    fitted = nll(cal.predict_proba(zv), yv)
    assert fitted <= nll_of_logits(zv, yv) + 1e-9
    assert fitted == pytest.approx(scipy_reference(zv, yv, name), abs=2e-4)
    assert_test_ece_not_worse(cal, zt, yt)
    assert all(n.startswith(f"{name}: LBFGS without line search diverged") for n in notes)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("line_search", ["strong_wolfe", None])
def test_dirichlet_reaches_the_scipy_optimum(scale, line_search):
    # at |z| = 1,000 the features (log-probabilities) reach -2,000 and the float32 LBFGS fit
    # stalls 2e-3 above the float64 optimum (a precision limit, not a divergence: it is far
    # below the start's objective); below that scale it lands within 2e-4
    zv, yv, zt, yt = data(scale)
    cal, _ = fit("dirichlet", zv, yv, device="cpu", line_search=line_search)
    x = log_softmax(np.asarray(zv, np.float64))
    odir = (1e-3, 1e-3)
    w, b = (cal.params_[k].astype(np.float64) for k in ("W", "b"))
    k = w.shape[0]
    penalty = odir[0] / (k * (k - 1)) * ((w - np.diag(np.diag(w))) ** 2).sum() + odir[1] / k * b @ b
    fitted = nll_of_logits(x @ w + b, yv) + penalty
    start = nll_of_logits(x, yv)  # identity map, zero penalty
    assert fitted <= start + 1e-9
    reference = scipy_reference(x, yv, "ms_b", odir=odir)
    assert fitted == pytest.approx(reference, abs=2e-4 if scale < 1000 else 3e-3)
    assert_test_ece_not_worse(cal, zt, yt)


@pytest.mark.parametrize("scale", [57, pytest.param(1000, marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", ["ms_odir_cv", "dir_odir_cv"])
def test_odir_cv_fold_models_are_guarded(name, scale):
    zv, yv, zt, yt = data(scale)
    cal, _ = fit(name, zv, yv, device="cpu", lambdas=[1e-3], mus=[1e-3], line_search=None)
    fitted = nll(cal.predict_proba(zv), yv)
    assert fitted <= nll_of_logits(zv, yv)
    if name == "ms_odir_cv" or scale < 1000:
        assert fitted <= ts_reference(scale)[1] + 0.02
    # dir_odir_cv's features are Kull et al.'s: log-probabilities clipped at log(2.2e-16) in
    # float32 (their code), which at |z| = 1,000 merge most classes: it stays above the
    # temperature's NLL there (1.88 vs 1.62) by design of the replicated protocol
    assert_test_ece_not_worse(cal, zt, yt)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", ["svs", "sms"])
def test_structured_scalings_keep_their_fit_on_large_logits(name, scale):
    # svs / sms generalise temperature scaling (TS-mix, then a ridge-penalised map close to it):
    # their validation NLL must stay within 0.01 of the NLL-optimal temperature's at every scale
    zv, yv, zt, yt = data(scale)
    cal, notes = fit(name, zv, yv)
    fitted = nll(cal.predict_proba(zv), yv)
    assert fitted <= nll_of_logits(zv, yv)
    assert fitted <= ts_reference(scale)[1] + 0.01
    assert_test_ece_not_worse(cal, zt, yt)
    assert notes == []


@pytest.mark.parametrize("scale", SCALES)
def test_ets_never_above_its_start_and_says_when_its_range_binds(scale):
    zv, yv, zt, yt = data(scale)
    cal, notes = fit("ets", zv, yv)
    z = np.asarray(zv, np.float64)
    w = cal.weights_
    mix = lambda t, w: w[0] * softmax(z / t) + w[1] * softmax(z) + w[2] / z.shape[1]  # noqa: E731
    fitted = _loss(mix(cal.temperature_, w), yv, "mse")
    assert fitted <= _loss(softmax(z), yv, "mse") + 1e-12  # start: T = 1, weights (1, 0, 0)
    # brute force over Zhang et al.'s range: the temperature is the grid optimum
    grid = np.exp(np.linspace(np.log(T_BOUNDS[0]), np.log(T_BOUNDS[1]), 2001))
    losses = [_loss(softmax(z / t), yv, "mse") for t in grid]
    assert _loss(softmax(z / cal.temperature_), yv, "mse") <= min(losses) + 1e-9
    assert_test_ece_not_worse(cal, zt, yt)
    # the optimum lies beyond T = 5 from |z| = 57 on (golden-section T: 8.3 at 57): said so
    t_star = np.exp(ts_reference(scale)[0])
    if t_star > 1.5 * T_BOUNDS[1]:
        assert len(notes) == 1 and notes[0] == cal.fit_note_
        assert notes[0].startswith("ets: the temperature stopped at the bound T=5 ")
        assert "the logits are too large for that range" in notes[0]
    else:
        assert notes == [] and cal.fit_note_ is None


def _plain_lbfgs(z, y, kind):
    """The study's fit, written out: torch LBFGS(lr=1, max_iter=1000), no line search, float32."""
    import torch

    zt = torch.as_tensor(np.asarray(z, np.float32))
    yt = torch.as_tensor(np.asarray(y, np.int64))
    k = zt.shape[1]
    if kind == "ts":
        params = [torch.ones(1, requires_grad=True)]
        g = lambda: zt * params[0]  # noqa: E731
    else:
        params = [torch.eye(k, requires_grad=True), torch.zeros(k, requires_grad=True)]
        g = lambda: zt @ params[0] + params[1]  # noqa: E731
    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=1000)

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(g(), yt)
        loss.backward()
        return loss

    opt.step(closure)
    return [p.detach().numpy() for p in params]


@pytest.mark.parametrize("kind", ["ts", "ms_b"])
def test_a_fit_that_did_not_diverge_is_bit_identical_to_plain_lbfgs(kind, small_problem):
    for z, y in (small_problem, data(10)[:2]):
        with warnings.catch_warnings():
            warnings.simplefilter("error", FitGuardWarning)
            cal = get_calibrator(kind, device="cpu").fit(z, y)
        assert cal.fit_note_ is None
        names = ["a"] if kind == "ts" else ["W", "b"]
        for name, ref in zip(names, _plain_lbfgs(z, y, kind), strict=True):
            assert cal.params_[name].dtype == ref.dtype
            assert cal.params_[name].tobytes() == ref.tobytes()


def test_a_refit_still_worse_than_the_start_is_a_one_line_error(monkeypatch):
    zv, yv, _, _ = data(10)

    def broken(logits, labels, kind, *args, **kwargs):
        return {"a": np.array([np.nan], dtype=np.float32)}

    monkeypatch.setattr(scaling_module, "_fit_scaling", broken)
    with pytest.raises(ValueError) as err:
        get_calibrator("ts", device="cpu").fit(zv, yv)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("ts: LBFGS without line search diverged (NLL non-finite > ")
    assert "the safe refit is still worse (non-finite)" in msg and "line_search" in msg
