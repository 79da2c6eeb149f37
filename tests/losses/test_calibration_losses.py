"""MMCE, AvUC, AvUC-GS and S-AvUC against hand computations and brute force."""

import math

import numpy as np
import pytest
import torch

from calbench.losses import get_loss
from calbench.losses.avuc import SoftAvUCLoss, entropy
from calbench.losses.mmce import mmce_term, mmce_weighted_term

# Four samples covering the AvUC categories with kappa = 0.5 nats:
#   p = (0.9, 0.1),   y = 0: correct,   h = 0.325083 (certain)   -> AC
#   p = (0.6, 0.4),   y = 0: correct,   h = 0.673012 (uncertain) -> AU
#   p = (0.95, 0.05), y = 1: incorrect, h = 0.198515 (certain)   -> IC
#   p = (0.55, 0.45), y = 1: incorrect, h = 0.688139 (uncertain) -> IU
ROWS = [[0.9, 0.1], [0.6, 0.4], [0.95, 0.05], [0.55, 0.45]]
TARGETS = torch.tensor([0, 0, 1, 1])


def _h(p):
    return -sum(q * math.log(q) for q in p)


@pytest.fixture
def four():
    return torch.log(torch.tensor(ROWS, dtype=torch.float64)), TARGETS


# ---------------------------------------------------------------- MMCE


def test_mmce_hand(two_rows):
    z, y = two_rows
    # r = (0.75, 0.8), c = (1, 0): d = (0.25, -0.8); k12 = exp(-0.05 / 0.4) = 0.8824969
    # MMCE^2 = (0.0625 + 0.64 - 2 * 0.25 * 0.8 * 0.8824969) / 4 = 0.0873753; MMCE = 0.2955930
    k12 = math.exp(-0.05 / 0.4)
    expected = math.sqrt((0.0625 + 0.64 - 2 * 0.25 * 0.8 * k12) / 4)
    assert mmce_term(z, y).item() == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(0.2955930, abs=1e-6)
    # the training objective: CE + 2 * MMCE = 0.9485599 + 0.5911861
    ce = (-math.log(0.75) - math.log(0.2)) / 2
    assert get_loss("mmce")(z, y).item() == pytest.approx(ce + 2 * expected, rel=1e-12)
    assert get_loss("mmce", lam=1, ce_weight=0)(z, y).item() == pytest.approx(expected, rel=1e-12)


def test_mmce_weighted_hand(two_rows):
    z, y = two_rows
    # D_c = {r=0.75}, D_ic = {r=0.8}, m_c = m_ic = 1:
    # (1-0.75)^2 + 0.8^2 - 2 (0.25)(0.8) k12 = 0.3495012, root 0.5911863
    k12 = math.exp(-0.05 / 0.4)
    expected = math.sqrt(0.0625 + 0.64 - 2 * 0.25 * 0.8 * k12)
    assert mmce_weighted_term(z, y).item() == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(0.5911861, abs=1e-6)


def _mmce_brute(p, y, width=0.4, weighted=False):
    r = p.max(1)
    c = (p.argmax(1) == y).astype(float)
    n = len(r)
    k = lambda a, b: math.exp(-abs(a - b) / width)  # noqa: E731
    if not weighted:
        s = sum((c[i] - r[i]) * (c[j] - r[j]) * k(r[i], r[j]) for i in range(n) for j in range(n))
        return math.sqrt(s / n**2)
    cor = [i for i in range(n) if c[i] == 1]
    inc = [i for i in range(n) if c[i] == 0]
    s = 0.0
    if cor:
        s += sum((1 - r[i]) * (1 - r[j]) * k(r[i], r[j]) for i in cor for j in cor) / len(cor) ** 2
    if inc:
        s += sum(r[i] * r[j] * k(r[i], r[j]) for i in inc for j in inc) / len(inc) ** 2
    if cor and inc:
        s -= (
            2
            * sum((1 - r[i]) * r[j] * k(r[i], r[j]) for i in cor for j in inc)
            / (len(cor) * len(inc))
        )
    return math.sqrt(s)


@pytest.mark.parametrize("weighted", [False, True])
def test_mmce_matches_double_loop(rand_batch, weighted):
    z, y = rand_batch
    p = torch.softmax(z, 1).numpy()
    f = mmce_weighted_term if weighted else mmce_term
    assert f(z, y).item() == pytest.approx(_mmce_brute(p, y.numpy(), weighted=weighted), rel=1e-10)


def test_mmce_weighted_all_correct_uses_correct_term_only():
    z = torch.log(torch.tensor([[0.7, 0.3], [0.2, 0.8]], dtype=torch.float64))
    y = torch.tensor([0, 1])  # both correct: r = (0.7, 0.8)
    k = math.exp(-0.1 / 0.4)
    expected = math.sqrt((0.09 + 0.04 + 2 * 0.3 * 0.2 * k) / 4)
    assert mmce_weighted_term(z, y).item() == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("name", ["mmce", "mmce_weighted"])
def test_mmce_gradcheck(rand_batch, name):
    z, y = rand_batch
    z = z[:5, :3].clone().requires_grad_(True)
    yy = y[:5] % 3
    loss = get_loss(name)
    assert torch.autograd.gradcheck(lambda t: loss(t, yy), (z,))


# ---------------------------------------------------------------- AvUC


def _avuc_hand():
    t = [math.tanh(_h(p)) for p in ROWS]
    n_ac, n_au = 0.9 * (1 - t[0]), 0.6 * t[1]
    n_ic, n_iu = 0.05 * (1 - t[2]), 0.45 * t[3]
    return math.log1p((n_au + n_ic) / (n_ac + n_iu))


def test_avuc_hand(four):
    z, y = four
    expected = _avuc_hand()
    assert expected == pytest.approx(0.3666757, abs=1e-6)
    assert get_loss("avuc", kappa=0.5)(z, y).item() == pytest.approx(expected, rel=1e-12)
    # -log AvU form of Krishnan and Tickoo: the same number
    assert get_loss("avuc_gs", kappa=0.5)(z, y).item() == pytest.approx(expected, rel=1e-12)


def test_avuc_default_kappa_is_half_log_k(four):
    z, y = four
    assert get_loss("avuc")(z, y).item() == pytest.approx(
        get_loss("avuc", kappa=0.5 * math.log(2))(z, y).item(), rel=1e-12
    )


def _avuc_manual(z, y, kappa, stop):
    p = torch.softmax(z, 1)
    h = entropy(p)
    c, pred = p.max(1)
    if stop:
        c = c.detach()
    th = torch.tanh(h)
    acc = pred == y
    unc = h > kappa
    n_ac = (c * (1 - th))[acc & ~unc].sum()
    n_au = (c * th)[acc & unc].sum()
    n_ic = ((1 - c) * (1 - th))[~acc & ~unc].sum()
    n_iu = ((1 - c) * th)[~acc & unc].sum()
    return torch.log(1 + (n_au + n_ic) / (n_ac + n_iu))


@pytest.mark.parametrize("name, stop", [("avuc", False), ("avuc_gs", True)])
def test_avuc_gradients(four, name, stop):
    z, y = four
    z1 = z.clone().requires_grad_(True)
    z2 = z.clone().requires_grad_(True)
    get_loss(name, kappa=0.5)(z1, y).backward()
    _avuc_manual(z2, y, 0.5, stop).backward()
    assert torch.allclose(z1.grad, z2.grad, rtol=1e-10, atol=1e-12)
    assert torch.isfinite(z1.grad).all()


def test_avuc_gs_changes_gradient_not_value(four):
    z, y = four
    za = z.clone().requires_grad_(True)
    zb = z.clone().requires_grad_(True)
    a = get_loss("avuc", kappa=0.5)(za, y)
    b = get_loss("avuc_gs", kappa=0.5)(zb, y)
    a.backward()
    b.backward()
    assert a.item() == b.item()
    assert not torch.allclose(za.grad, zb.grad)


# (avuc_gs is excluded on purpose: its stopped gradient is not the derivative of its value)
@pytest.mark.parametrize("name", ["avuc", "savuc"])
def test_avuc_family_gradcheck(four, name):
    z, y = four
    z = z.clone().requires_grad_(True)
    loss = get_loss(name, kappa=0.5) if name != "savuc" else get_loss(name, kappa=0.3)
    assert torch.autograd.gradcheck(lambda t: loss(t, y), (z,))


# ---------------------------------------------------------------- S-AvUC


def _smoothed_h(p):
    q = [(1 - 1e-5) * v + 1e-5 / len(p) for v in p]
    return _h(q)


def test_savuc_identity_case_hand(four):
    # kappa = 0.5, T = 1: t(h*) = h*, so n'_AC = sum_correct (1 - h*)(1 - tanh h), etc.
    z, y = four
    hs = [_smoothed_h(p) for p in ROWS]
    hstar = [h / math.log(2) for h in hs]
    t = [math.tanh(h) for h in hs]
    n_ac = sum((1 - hstar[i]) * (1 - t[i]) for i in (0, 1))
    n_au = sum(hstar[i] * t[i] for i in (0, 1))
    n_ic = sum((1 - hstar[i]) * (1 - t[i]) for i in (2, 3))
    n_iu = sum(hstar[i] * t[i] for i in (2, 3))
    expected = math.log1p((n_au + n_ic) / (n_ac + n_iu))
    out = get_loss("savuc", temperature=1.0, kappa=0.5)(z, y)
    assert out.item() == pytest.approx(expected, rel=1e-10)
    assert out.item() == pytest.approx(0.8165061, abs=1e-4)  # unsmoothed hand value


def test_savuc_small_temperature_gives_hard_threshold(four):
    # kappa = 0.6, T -> 0: t = 1[h* > 0.6]; h* = (0.469, 0.971, 0.286, 0.993)
    # -> AC = {0}, AU = {1}, IC = {2}, IU = {3} with factors (1 - tanh h) / tanh h only
    z, y = four
    t = [math.tanh(_h(p)) for p in ROWS]
    expected = math.log1p((t[1] + (1 - t[2])) / ((1 - t[0]) + t[3]))
    assert expected == pytest.approx(0.7345039, abs=1e-6)
    out = get_loss("savuc", temperature=1e-3, kappa=0.6)(z, y)
    assert out.item() == pytest.approx(expected, abs=1e-4)


def test_soft_uncertainty_properties():
    h = torch.tensor([0.0, 0.1, 0.3, 0.5, 0.9, 1.0], dtype=torch.float64)
    ident = SoftAvUCLoss(temperature=1.0, kappa=0.5).soft_uncertainty(h)
    assert torch.allclose(ident[1:-1], h[1:-1], atol=1e-12)
    for T in (0.1, 1.0, 5.0):
        f = SoftAvUCLoss(temperature=T, kappa=0.3)
        assert f.soft_uncertainty(torch.tensor([0.3], dtype=torch.float64)).item() == pytest.approx(
            0.5
        )
        v = f.soft_uncertainty(h)
        assert (v[1:] >= v[:-1]).all() and v[0] < 1e-3 and v[-1] > 1 - 1e-3
    # theta is kappa's alias
    assert SoftAvUCLoss(theta=0.2).kappa == 0.2


def test_savuc_uniform_predictions_finite_gradient():
    # a zero-initialised classifier predicts uniform probabilities: h* = 1 exactly
    z = torch.zeros(4, 10, requires_grad=True)
    out = get_loss("savuc", temperature=0.5, kappa=0.2)(z, torch.arange(4))
    out.backward()
    assert torch.isfinite(out) and torch.isfinite(z.grad).all()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"kappa": 0.0}, "kappa"),
        ({"kappa": 1.0}, "kappa"),
        ({"temperature": 0.0}, "temperature"),
        ({"kappa": 0.2, "theta": 0.3}, "either kappa or theta"),
    ],
)
def test_savuc_bad_params(kwargs, match):
    with pytest.raises(ValueError, match=match):
        get_loss("savuc", **kwargs)


def test_all_secondaries_finite_on_random_float32():
    g = torch.Generator().manual_seed(3)
    z = (torch.randn(64, 10, generator=g) * 4).requires_grad_(True)
    y = torch.randint(0, 10, (64,), generator=g)
    for name in ("mmce", "mmce_weighted", "avuc", "avuc_gs", "savuc"):
        z.grad = None
        out = get_loss(name)(z, y)
        out.backward()
        assert torch.isfinite(out) and torch.isfinite(z.grad).all(), name
        assert np.isfinite(out.item())
