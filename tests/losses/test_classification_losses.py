import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.metrics import brier_score_loss, log_loss

from calbench.losses import LOSSES, get_loss
from calbench.losses.classification import FLSD53Loss, FocalLoss, LabelSmoothingLoss


def test_ce_hand(two_rows):
    z, y = two_rows
    # row 1: -ln 0.75 = 0.287682; row 2: -ln 0.2 = 1.609438; mean 0.948560
    out = get_loss("ce")(z, y)
    assert out.item() == pytest.approx(0.9485599, abs=1e-6)
    assert out.item() == pytest.approx((-math.log(0.75) - math.log(0.2)) / 2, rel=1e-12)


def test_ce_matches_sklearn_log_loss(rand_batch):
    z, y = rand_batch
    p = torch.softmax(z, 1).numpy()
    assert get_loss("ce")(z, y).item() == pytest.approx(log_loss(y.numpy(), p, labels=range(5)))


def test_focal_hand(two_rows):
    z, y = two_rows
    # gamma=2: 0.25^2 * 0.287682 = 0.0179801; 0.8^2 * 1.609438 = 1.0300404; mean 0.5240103
    out = get_loss("focal", gamma=2)(z, y)
    assert out.item() == pytest.approx(0.5240103, abs=1e-6)
    expected = (0.25**2 * -math.log(0.75) + 0.8**2 * -math.log(0.2)) / 2
    assert out.item() == pytest.approx(expected, rel=1e-12)


def test_focal_gamma0_is_ce_and_larger_gamma_is_smaller(rand_batch):
    z, y = rand_batch
    ce = F.cross_entropy(z, y)
    assert get_loss("focal", gamma=0)(z, y).item() == pytest.approx(ce.item(), rel=1e-12)
    vals = [get_loss("focal", gamma=g)(z, y).item() for g in (0, 1, 2, 3)]
    assert all(a > b for a, b in zip(vals, vals[1:], strict=False))


def test_focal_gradient_hand():
    # K=2, logits (0, 0), target 0, gamma=1: p = 0.5 and, with s = z0 - z1, p = sigmoid(s),
    # FL(s) = -(1 - p) log p; dFL/ds = p(1-p) log p - (1-p)^2 = 0.25 ln 0.5 - 0.25 = -0.4232868
    # and dFL/dz0 = dFL/ds, dFL/dz1 = -dFL/ds.
    z = torch.zeros(1, 2, dtype=torch.float64, requires_grad=True)
    FocalLoss(gamma=1)(z, torch.tensor([0])).backward()
    d = 0.25 * math.log(0.5) - 0.25
    assert z.grad[0, 0].item() == pytest.approx(d, rel=1e-12)
    assert z.grad[0, 1].item() == pytest.approx(-d, rel=1e-12)


def test_flsd53_hand():
    # p_y = 0.75 (>= 0.2: gamma 3) and p_y = 0.1 (< 0.2: gamma 5)
    z = torch.log(torch.tensor([[0.25, 0.75], [0.9, 0.1]], dtype=torch.float64))
    y = torch.tensor([1, 1])
    expected = (0.25**3 * -math.log(0.75) + 0.9**5 * -math.log(0.1)) / 2  # 0.6820740
    out = get_loss("flsd53")(z, y)
    assert out.item() == pytest.approx(expected, rel=1e-12)
    assert out.item() == pytest.approx(0.6820740, abs=1e-6)


def test_flsd53_equals_focal_on_each_side_of_threshold():
    z_hi = torch.log(torch.tensor([[0.3, 0.7], [0.6, 0.4]], dtype=torch.float64))
    z_lo = torch.log(torch.tensor([[0.95, 0.05], [0.15, 0.85]], dtype=torch.float64))
    y_hi, y_lo = torch.tensor([1, 1]), torch.tensor([1, 0])
    flsd = FLSD53Loss()
    assert flsd(z_hi, y_hi).item() == pytest.approx(FocalLoss(3)(z_hi, y_hi).item(), rel=1e-12)
    assert flsd(z_lo, y_lo).item() == pytest.approx(FocalLoss(5)(z_lo, y_lo).item(), rel=1e-12)


def test_label_smoothing_hand(two_rows):
    z, y = two_rows
    # alpha=0.1, K=2: targets (0.05, 0.95) and (0.95, 0.05)
    # row 1: -(0.05 ln .25 + 0.95 ln .75) = 0.3426134; row 2: -(0.95 ln .2 + 0.05 ln .8) = 1.5401237
    out = get_loss("label_smoothing", alpha=0.1)(z, y)
    expected = (
        -(0.05 * math.log(0.25) + 0.95 * math.log(0.75))
        - (0.95 * math.log(0.2) + 0.05 * math.log(0.8))
    ) / 2
    assert out.item() == pytest.approx(expected, rel=1e-12)
    assert out.item() == pytest.approx(0.9413686, abs=1e-6)


@pytest.mark.parametrize("alpha", [0.0, 0.05, 0.3, 1.0])
def test_label_smoothing_matches_torch(rand_batch, alpha):
    z, y = rand_batch
    ref = F.cross_entropy(z, y, label_smoothing=alpha)
    assert LabelSmoothingLoss(alpha)(z, y).item() == pytest.approx(ref.item(), rel=1e-12)


def test_label_smoothing_zero_is_ce(rand_batch):
    z, y = rand_batch
    assert get_loss("label_smoothing", alpha=0)(z, y).item() == pytest.approx(
        F.cross_entropy(z, y).item(), rel=1e-12
    )


def test_brier_hand(two_rows):
    z, y = two_rows
    # row 1: (0.25)^2 + (0.75 - 1)^2 = 0.125; row 2: (0.2 - 1)^2 + 0.8^2 = 1.28; mean 0.7025
    assert get_loss("brier")(z, y).item() == pytest.approx(0.7025, rel=1e-12)


def test_brier_binary_is_twice_sklearn(rand_batch):
    z, y = rand_batch
    z2, y2 = z[:, :2], (y % 2)
    p1 = torch.softmax(z2, 1)[:, 1].numpy()
    ref = 2 * brier_score_loss(y2.numpy(), p1)  # sklearn counts only the positive class
    assert get_loss("brier")(z2, y2).item() == pytest.approx(ref, rel=1e-10)


@pytest.mark.parametrize("name", ["ce", "focal", "label_smoothing", "brier"])
def test_gradcheck_smooth_losses(rand_batch, name):
    z, y = rand_batch
    z = z[:6].clone().requires_grad_(True)
    loss = get_loss(name)
    assert torch.autograd.gradcheck(lambda t: loss(t, y[:6]), (z,))


def test_gradcheck_flsd53_away_from_threshold():
    z = torch.log(torch.tensor([[0.3, 0.5, 0.2], [0.1, 0.05, 0.85]], dtype=torch.float64))
    z.requires_grad_(True)
    y = torch.tensor([1, 1])  # p_y = 0.5 (gamma 3) and 0.05 (gamma 5)
    assert torch.autograd.gradcheck(lambda t: FLSD53Loss()(t, y), (z,))


def test_float32_and_large_logits_give_finite_grads():
    z = torch.tensor([[80.0, -80.0, 0.0], [0.0, 0.0, 0.0]], requires_grad=True)
    y = torch.tensor([1, 2])
    for name in ("ce", "focal", "flsd53", "label_smoothing", "brier"):
        z.grad = None
        out = get_loss(name)(z, y)
        out.backward()
        assert torch.isfinite(out) and torch.isfinite(z.grad).all(), name
        assert out.dtype == torch.float32


@pytest.mark.parametrize("gamma", [0.5, 1.0, 3.0])
def test_focal_saturated_probability_has_finite_gradient(gamma):
    # p_t rounds to exactly 1 in float32: (1 - p_t)^gamma must not give 0 * inf = NaN
    z = torch.tensor([[50.0, -50.0], [0.3, -0.2]], requires_grad=True)
    y = torch.tensor([0, 1])
    out = FocalLoss(gamma)(z, y)
    out.backward()
    assert torch.isfinite(z.grad).all()
    assert z.grad[0].abs().max() == 0.0  # the saturated row contributes nothing
    expected = (
        0.0
        + (1 - math.exp(-0.5) / (1 + math.exp(-0.5))) ** gamma
        * -math.log(math.exp(-0.5) / (1 + math.exp(-0.5)))
    ) / 2
    assert out.item() == pytest.approx(expected, rel=1e-5)


def test_registry_names():
    for n in (
        "ce", "focal", "flsd53", "label_smoothing", "brier", "mmce", "mmce_weighted",
        "avuc", "avuc_gs", "sbece", "savuc", "dece",
    ):  # fmt: skip
        assert n in LOSSES
        assert LOSSES[n].name == n


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: get_loss("nope"), "unknown loss"),
        (lambda: get_loss("focal", alpha=1), "does not take"),
        (lambda: get_loss("focal", gamma=-1), "gamma"),
        (lambda: get_loss("label_smoothing", alpha=1.5), "alpha"),
        (lambda: get_loss("focal", gamma="x"), "gamma"),
        (lambda: get_loss("ce", secondary={"name": "brier", "weight": 2}), "unknown keys"),
        (lambda: get_loss("ce", secondary=3), "secondary"),
    ],
)
def test_bad_construction(build, match):
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.parametrize(
    "z, y, match",
    [
        (torch.zeros(3), torch.zeros(3, dtype=torch.long), r"shape \(B, K\)"),
        (torch.zeros(3, 2), torch.zeros(2, dtype=torch.long), "targets must have shape"),
        (torch.zeros(3, 2), torch.zeros(3), "integer class indices"),
        (torch.zeros(3, 2), torch.tensor([0, 1, 2]), r"lie in \[0, 1\]"),
        (torch.zeros(0, 2), torch.zeros(0, dtype=torch.long), "empty"),
        (torch.zeros(3, 1), torch.zeros(3, dtype=torch.long), "at least 2 classes"),
        (np.zeros((3, 2)), torch.zeros(3, dtype=torch.long), "torch tensors"),
        (torch.zeros(3, 2, dtype=torch.long), torch.zeros(3, dtype=torch.long), "floating"),
    ],
)
def test_bad_inputs(z, y, match):
    with pytest.raises(ValueError, match=match):
        get_loss("ce")(z, y)
