"""SB-ECE and DECE as losses: hand computations, limits (-> hard ECE), gradients."""

import math

import numpy as np
import pytest
import torch

from calbench.losses import get_loss
from calbench.metrics.soft import dece_torch, sb_ece_torch


def _hard_ece(conf, correct, n_bins=15, p=1):
    """Equal-width l_p ECE with bins ((m-1)/M, m/M], written out by hand."""
    conf, correct = np.asarray(conf), np.asarray(correct, dtype=float)
    idx = np.clip(np.ceil(conf * n_bins).astype(int) - 1, 0, n_bins - 1)
    total = 0.0
    for m in range(n_bins):
        sel = idx == m
        if sel.any():
            total += sel.mean() * abs(correct[sel].mean() - conf[sel].mean()) ** p
    return total ** (1 / p)


def _batch_off_boundaries(n=200, k=4, seed=0, n_bins=15):
    """Random logits whose confidences sit >= 0.005 from every bin edge."""
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(4 * n, k, generator=g, dtype=torch.float64) * 1.5
    y = torch.randint(0, k, (4 * n,), generator=g)
    c = torch.softmax(z, 1).max(1).values.numpy()
    dist = np.abs(c * n_bins - np.round(c * n_bins)) / n_bins
    keep = np.flatnonzero(dist > 0.005)[:n]
    return z[keep], y[keep]


def test_sbece_bin_form_hand(two_rows):
    # M = 2 (centres 0.25, 0.75), T = 0.1, p = 1; confidences 0.75 (correct), 0.8 (wrong)
    # u(0.75) = softmax(-2.5, 0)    = (0.075858, 0.924142)
    # u(0.8)  = softmax(-3.025, -0.025) = (0.047426, 0.952574)
    # S = (0.123284, 1.876716); A = (0.615309, 0.492426); C = (0.769235, 0.775381)
    # SB-ECE = sum_j S_j / 2 |A_j - C_j| = 0.061642 * 0.153926 + 0.938358 * 0.282955 = 0.275001
    z, y = two_rows
    u1 = [math.exp(-2.5) / (1 + math.exp(-2.5)), 1 / (1 + math.exp(-2.5))]
    u2 = [math.exp(-3.0) / (1 + math.exp(-3.0)), 1 / (1 + math.exp(-3.0))]
    expected = 0.0
    for j in range(2):
        s = u1[j] + u2[j]
        a = u1[j] / s
        c = (0.75 * u1[j] + 0.8 * u2[j]) / s
        expected += s / 2 * abs(a - c)
    out = get_loss("sbece", form="bin", n_bins=2, temperature=0.1, p=1)(z, y)
    assert out.item() == pytest.approx(expected, rel=1e-10)
    assert out.item() == pytest.approx(0.275001, abs=1e-5)


def test_sbece_label_binned_hand(two_rows):
    # K = 2, M = 2: edges linspace(1/2, 1, 3) = (0.5, 0.75, 1), centres (0.625, 0.875);
    # u smoothed as (1 - 1e-5) u + 1e-5 / 2; A_j = sum_i u_ij a_i / sum_i u_ij;
    # SB-ECE_lb,2 = sqrt((1/2) sum_i sum_j u_ij (A_j - c_i)^2)
    z, y = two_rows
    T = 0.05
    conf, acc = [0.75, 0.8], [1.0, 0.0]
    centres = [0.625, 0.875]
    u = []
    for c in conf:
        e = [math.exp(-((c - xi) ** 2) / T) for xi in centres]
        u.append([(1 - 1e-5) * v / sum(e) + 1e-5 / 2 for v in e])
    A = [sum(u[i][j] * acc[i] for i in range(2)) / sum(u[i][j] for i in range(2)) for j in range(2)]
    sq = sum(u[i][j] * (A[j] - conf[i]) ** 2 for i in range(2) for j in range(2)) / 2
    loss = get_loss("sbece", form="label_binned", n_bins=2, temperature=T, p=2)
    assert loss(z, y).item() == pytest.approx(math.sqrt(sq), rel=1e-10)
    # root=False: the authors' training loss, the square without the root
    squared = get_loss("sbece", form="label_binned", n_bins=2, temperature=T, p=2, root=False)
    assert squared(z, y).item() == pytest.approx(sq, rel=1e-10)


def test_sbece_wraps_metric_on_softmax(rand_batch):
    z, y = rand_batch
    for form in ("bin", "label_binned"):
        ref = sb_ece_torch(torch.softmax(z, 1), y, n_bins=10, temperature=0.01, p=2, form=form)
        out = get_loss("sbece", form=form, n_bins=10, temperature=0.01, p=2)(z, y)
        assert out.item() == pytest.approx(ref.item(), rel=1e-12)


@pytest.mark.parametrize("p", [1, 2])
def test_sbece_bin_tends_to_hard_ece_as_temperature_shrinks(p):
    z, y = _batch_off_boundaries()
    probs = torch.softmax(z, 1)
    conf, pred = probs.max(1)
    hard = _hard_ece(conf.numpy(), (pred == y).numpy(), 15, p)
    errs = [
        abs(get_loss("sbece", form="bin", temperature=t, p=p)(z, y).item() - hard)
        for t in (1e-2, 1e-3, 1e-5)
    ]
    assert errs[-1] < 1e-6
    assert errs[0] > errs[-1]
    # cross-check the hand ECE with the package's metric (p = 1)
    if p == 1:
        from calbench.metrics import ece

        assert ece(probs.numpy(), y.numpy(), n_bins=15) == pytest.approx(hard, rel=1e-10)


def test_dece_wraps_metric_and_defaults(rand_batch):
    z, y = rand_batch
    ref = dece_torch(torch.softmax(z, 1), y, n_bins=15, tau_a=100.0, tau_b=0.01)
    assert get_loss("dece")(z, y).item() == pytest.approx(ref.item(), rel=1e-12)
    loss = get_loss("dece")
    assert (loss.n_bins, loss.tau_a, loss.tau_b) == (15, 100.0, 0.01)


def test_dece_tends_to_hard_ece():
    z, y = _batch_off_boundaries(seed=1)
    probs = torch.softmax(z, 1)
    conf, pred = probs.max(1)
    hard = _hard_ece(conf.numpy(), (pred == y).numpy(), 15)
    sharp = get_loss("dece", tau_a=1e6, tau_b=1e-5)(z, y).item()
    default = get_loss("dece")(z, y).item()
    assert sharp == pytest.approx(hard, abs=1e-4)
    assert abs(default - hard) > abs(sharp - hard)


def test_dece_single_sample_hand():
    # one sample, p = (0.7, 0.2, 0.1), label 0 (top): soft acc ~ 1, confidence 0.7; with tau_b
    # small all membership sits in one bin, so DECE ~ |1 - 0.7| = 0.3 (up to the 1e-6 smoothing)
    z = torch.log(torch.tensor([[0.7, 0.2, 0.1]], dtype=torch.float64))
    out = get_loss("dece", tau_a=1e4, tau_b=1e-4)(z, torch.tensor([0])).item()
    assert out == pytest.approx(0.3, abs=1e-4)
    # label 2 (third): rank 3 -> soft accuracy relu(2 - 3) = 0: DECE ~ 0.7
    out = get_loss("dece", tau_a=1e4, tau_b=1e-4)(z, torch.tensor([2])).item()
    assert out == pytest.approx(0.7, abs=1e-4)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "sbece", "form": "bin", "temperature": 0.05, "n_bins": 5},
        {"name": "sbece", "form": "label_binned", "temperature": 0.05, "n_bins": 5},
        {"name": "dece", "tau_a": 10.0, "tau_b": 0.1, "n_bins": 5},
    ],
)
def test_soft_losses_gradcheck(rand_batch, kwargs):
    z, y = rand_batch
    z = z[:6, :3].clone().requires_grad_(True)
    yy = y[:6] % 3
    kw = dict(kwargs)
    loss = get_loss(kw.pop("name"), **kw)
    assert torch.autograd.gradcheck(lambda t: loss(t, yy), (z,))


def test_soft_losses_finite_gradients_float32():
    g = torch.Generator().manual_seed(2)
    z = (torch.randn(128, 10, generator=g) * 3).requires_grad_(True)
    y = torch.randint(0, 10, (128,), generator=g)
    for loss in (get_loss("sbece"), get_loss("sbece", form="bin"), get_loss("dece")):
        z.grad = None
        out = loss(z, y)
        out.backward()
        assert torch.isfinite(out) and torch.isfinite(z.grad).all() and z.grad.abs().sum() > 0


def test_sbece_as_secondary(rand_batch):
    z, y = rand_batch
    kw = {"form": "label_binned", "temperature": 0.01}
    total = get_loss("focal", gamma=1, secondary={"name": "sbece", "beta": 0.5, "kwargs": kw})(z, y)
    expected = get_loss("focal", gamma=1)(z, y) + 0.5 * get_loss("sbece", **kw)(z, y)
    assert total.item() == pytest.approx(expected.item(), rel=1e-12)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"name": "sbece", "form": "hard"}, "form"),
        ({"name": "sbece", "n_bins": 0}, "n_bins"),
        ({"name": "sbece", "temperature": 0}, "temperature"),
        ({"name": "sbece", "root": "yes"}, "root"),
        ({"name": "dece", "tau_a": -1}, "tau_a"),
        ({"name": "dece", "tau_b": 0}, "tau_b"),
    ],
)
def test_soft_losses_bad_params(kwargs, match):
    kw = dict(kwargs)
    with pytest.raises(ValueError, match=match):
        get_loss(kw.pop("name"), **kw)
