"""Values and gradients of the losses against rebuilds of the formulas in the loss code released
with focal_calibration (Mukhoti et al. 2020) and Meta-Calibration (Bohdal et al. 2021,
``Losses/``), with which Bohdal et al. 2021's baselines were trained.

Each reference below is written from the released formula (not from calbench's code):

* focal: ``sum_i -(1 - p_i)^gamma log p_i`` (summed over the batch);
* FLSD-53: the same with ``gamma_i = 5`` if ``p_i < 0.2``, ``3`` if ``p_i < 0.5``, else ``gamma``
  (3), chosen from the detached ``p_i``; summed;
* Brier: ``sum_{i,k} (onehot - softmax)^2 / B``;
* MMCE: ``mean CE + lamda * (1/B^2) sum_{i,j} (c_i - r_i)(c_j - r_j) exp(-|r_i - r_j| / 0.4)``
  (squared estimate, no root; ``lamda = 2``);
* weighted MMCE: ``mean CE + lamda * sqrt(mean_cc / (m^2 + 1e-5) + mean_ii / (n^2 + 1e-5)
  - 2 mean_ci / (m n + 1e-5) + 1e-10)`` where ``mean_xy`` averages the kernel-weighted products
  over the pairs of the correct (x = c, weight 1 - r) / incorrect (weight r) sets, 0 when one set
  is empty;
* DECE: soft binning ``softmax((c W + b) / t_b)`` with ``W = 1..M``, ``b = cumsum(-cut points)``,
  smoothed by ``(o + 1e-6) / (1 + (M + 1) 1e-6)``, soft accuracy ``relu(2 - rank_y)`` with
  ``rank_i = 0.5 + sum_j sigmoid(t_a (p_j - p_i))``, ``sum_m (n_m / B) |acc_m - conf_m|``.

calbench averages focal and FLSD-53 over the batch (the released code sums), so those two are
compared as ``B x`` calbench's value and gradient.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from calbench.losses import get_loss


def batch(b, k, seed, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    z = (torch.randn(b, k, generator=g, dtype=torch.float64) * scale).requires_grad_(True)
    y = torch.randint(0, k, (b,), generator=g)
    return z, y


def ref_focal(z, y, gamma=3.0):
    logp = torch.log_softmax(z, dim=1)[torch.arange(len(y)), y]
    return (-(1 - logp.exp()) ** gamma * logp).sum()


def ref_flsd53(z, y, gamma=3.0):
    logp = torch.log_softmax(z, dim=1)[torch.arange(len(y)), y]
    p = logp.exp()
    gammas = torch.tensor(
        [5.0 if v < 0.2 else 3.0 if v < 0.5 else gamma for v in p.detach().tolist()],
        dtype=z.dtype,
    )
    return (-(1 - p) ** gammas * logp).sum()


def ref_brier(z, y):
    onehot = torch.zeros_like(z)
    onehot[torch.arange(len(y)), y] = 1.0
    return ((onehot - torch.softmax(z, dim=1)) ** 2).sum() / z.shape[0]


def _conf(z, y):
    p = torch.softmax(z, dim=1)
    r, pred = p.max(dim=1)
    return r, (pred == y).to(z.dtype)


def ref_mmce(z, y, lamda=2.0):
    r, c = _conf(z, y)
    kern = torch.exp(-torch.cdist(r[:, None], r[:, None], p=1) / 0.4)
    term = ((c - r)[:, None] @ (c - r)[None, :] * kern).sum() / len(y) ** 2
    return F.cross_entropy(z, y) + lamda * term


def ref_mmce_weighted(z, y, lamda=2.0):
    r, c = _conf(z, y)
    rc, ri = r[c > 0.5], r[c < 0.5]
    m, n = float(len(rc)), float(len(ri))
    if m == 0 or n == 0:
        return F.cross_entropy(z, y)

    def mean_pairs(u, wu, v, wv):
        kern = torch.exp(-torch.cdist(u[:, None], v[:, None], p=1) / 0.4)
        return (wu[:, None] * wv[None, :] * kern).mean()

    val = mean_pairs(rc, 1 - rc, rc, 1 - rc) / (m * m + 1e-5)
    val = val + mean_pairs(ri, ri, ri, ri) / (n * n + 1e-5)
    val = val - 2 * mean_pairs(rc, 1 - rc, ri, ri) / (m * n + 1e-5)
    return F.cross_entropy(z, y) + lamda * torch.sqrt(val + 1e-10)


def ref_dece(z, y, n_bins=15, t_a=100.0, t_b=0.01):
    p = torch.softmax(z, dim=1)
    conf = p.max(dim=1).values
    cuts = torch.tensor([i / n_bins for i in range(n_bins)], dtype=z.dtype)
    w = torch.tensor([float(i + 1) for i in range(n_bins)], dtype=z.dtype)
    o = torch.softmax((conf[:, None] * w + torch.cumsum(-cuts, 0)) / t_b, dim=1)
    o = (o + 1e-6) / (1 + (n_bins + 1) * 1e-6)
    diff = p[:, None, :] - p[:, :, None]  # [n, i, j] = p_j - p_i
    rank = torch.sigmoid(t_a * diff).sum(dim=2) + 0.5
    acc = torch.relu(2.0 - rank[torch.arange(len(y)), y])
    mass = o.sum(dim=0)
    gap = torch.abs((o * acc[:, None]).sum(0) / mass - (o * conf[:, None]).sum(0) / mass)
    return (mass * gap).sum() / len(y)


CASES = [
    # (calbench loss, kwargs, reference, calbench's value times this equals the released one)
    ("focal", {"gamma": 3.0}, ref_focal, "batch"),
    ("flsd53", {}, ref_flsd53, "batch"),
    ("brier", {}, ref_brier, 1),
    ("mmce", {"lam": 2.0, "form": "released"}, ref_mmce, 1),
    ("mmce_weighted", {"lam": 2.0, "form": "released"}, ref_mmce_weighted, 1),
    ("dece", {"n_bins": 15, "tau_a": 100.0, "tau_b": 0.01}, ref_dece, 1),
]


@pytest.mark.parametrize(("name", "kwargs", "ref", "factor"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize(("b", "k", "seed"), [(64, 10, 0), (32, 100, 1), (48, 10, 2)])
def test_value_and_gradient_equal_the_released_formula(name, kwargs, ref, factor, b, k, seed):
    z, y = batch(b, k, seed, scale=1.0 if name == "dece" else 3.0)
    f = b if factor == "batch" else factor
    ours = f * get_loss(name, **kwargs)(z, y)
    (g_ours,) = torch.autograd.grad(ours, z)
    want = ref(z, y)
    (g_want,) = torch.autograd.grad(want, z)
    torch.testing.assert_close(ours, want, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g_ours, g_want, rtol=1e-8, atol=1e-11)


def test_released_mmce_differs_from_the_paper_form():
    z, y = batch(64, 10, 0)
    paper = get_loss("mmce", lam=2.0)(z, y)
    released = get_loss("mmce", lam=2.0, form="released")(z, y)
    assert released.item() < paper.item() - 0.1  # MMCE^2 < MMCE when MMCE < 1
    ce = F.cross_entropy(z, y)
    term = (released - ce) / 2.0
    assert term.item() == pytest.approx(((paper - ce) / 2.0).item() ** 2, rel=1e-9)


def test_released_weighted_mmce_is_zero_when_one_set_is_empty():
    z = torch.tensor([[3.0, 0.0], [0.0, 2.0]], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 1])  # all correct
    value = get_loss("mmce_weighted", lam=2.0, form="released")(z, y)
    torch.testing.assert_close(value, F.cross_entropy(z, y))
    (g,) = torch.autograd.grad(value, z)
    assert torch.isfinite(g).all()


def test_form_is_validated():
    with pytest.raises(ValueError, match="form must be one of"):
        get_loss("mmce", form="tf")
