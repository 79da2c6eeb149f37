"""Tests for the soft calibration errors SB-ECE and DECE (numpy and torch)."""

import numpy as np
import pytest

from calbench.metrics import dece, dece_torch, ece, sb_ece, sb_ece_torch
from calbench.metrics.soft import soft_accuracy

torch = pytest.importorskip("torch")

PROBS5 = np.array(
    [
        [0.9, 0.05, 0.05],
        [0.85, 0.1, 0.05],
        [0.1, 0.7, 0.2],
        [0.65, 0.3, 0.05],
        [0.15, 0.3, 0.55],
    ]
)
LABELS5 = np.array([0, 1, 1, 2, 2])  # conf .9 .85 .7 .65 .55, correct 1 0 1 0 1


def random_probs(n, k, seed, scale=2.5):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, k)) * scale
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True), rng.integers(0, k, n)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


# ----------------------------------------------------------------------------- SB-ECE


@pytest.mark.parametrize("p", [1, 2, 3])
def test_sb_ece_one_bin_is_gap_of_means(p):
    # one bin: every membership is 1, so SB-ECE = |mean correct - mean conf| = |.6 - .73|
    assert sb_ece(PROBS5, LABELS5, n_bins=1, temperature=0.05, p=p) == pytest.approx(
        0.13, abs=1e-15
    )


def test_sb_ece_label_binned_one_bin():
    # one bin: A = .6 for every sample; eq. 12 = (mean |.6 - c_i|^p)^(1/p)
    gaps = np.array([0.3, 0.25, 0.1, 0.05, 0.05])
    assert sb_ece(PROBS5, LABELS5, n_bins=1, p=1, form="label_binned") == pytest.approx(
        gaps.mean(), abs=1e-15
    )
    assert sb_ece(PROBS5, LABELS5, n_bins=1, p=2, form="label_binned") == pytest.approx(
        np.sqrt(np.mean(gaps**2)), abs=1e-15
    )


def test_sb_ece_two_bins_hand_computed():
    # conf .3 (correct) and .9 (wrong); centres .25 and .75; T = .1
    probs = np.array([[0.3, 0.25, 0.25, 0.2], [0.9, 0.05, 0.03, 0.02]])
    labels = np.array([0, 1])
    u1 = np.exp([-(0.05**2) / 0.1, -(0.45**2) / 0.1])  # e^-.025, e^-2.025
    u2 = np.exp([-(0.65**2) / 0.1, -(0.15**2) / 0.1])  # e^-4.225, e^-.225
    u1, u2 = u1 / u1.sum(), u2 / u2.sum()
    s = u1 + u2
    conf = (0.3 * u1 + 0.9 * u2) / s
    acc = (1.0 * u1 + 0.0 * u2) / s
    expected = np.sqrt(np.sum(s / 2 * (acc - conf) ** 2))
    got = sb_ece(probs, labels, n_bins=2, temperature=0.1, p=2)
    assert got == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("p,norm", [(1, "l1"), (2, "l2")])
def test_sb_ece_tiny_temperature_is_hard_ece(p, norm):
    probs, labels = random_probs(3000, 10, 0)
    conf = probs.max(axis=1)
    edges = np.linspace(0, 1, 16)
    # precondition: no confidence within 1e-8 of a bin edge, so T = 1e-12 is hard binning
    assert np.min(np.abs(conf[:, None] - edges[None, :])) > 1e-8
    got = sb_ece(probs, labels, temperature=1e-12, p=p)
    assert got == pytest.approx(ece(probs, labels, norm=norm), abs=1e-10)


def test_sb_ece_label_binned_tiny_temperature_is_hard_label_binned():
    probs, labels = random_probs(3000, 10, 1)
    conf = probs.max(axis=1)
    correct = (probs.argmax(axis=1) == labels).astype(float)
    edges = np.linspace(1 / 10, 1, 16)
    b = np.clip(np.searchsorted(edges, conf, side="right") - 1, 0, 14)
    acc = np.array([correct[b == j].mean() if (b == j).any() else 0.0 for j in range(15)])
    hard = np.sqrt(np.mean((acc[b] - conf) ** 2))  # eq. 7, p = 2
    got = sb_ece(probs, labels, temperature=1e-12, form="label_binned")
    assert got == pytest.approx(hard, abs=1e-4)  # the 1e-5 uniform mix biases slightly


# ----------------------------------------------------------------------------- DECE


def test_soft_accuracy_hand_computed():
    probs = np.array([[0.5, 0.49, 0.01], [0.9, 0.05, 0.05], [0.9, 0.05, 0.05]])
    labels = np.array([0, 0, 1])
    # row 1: rank = 0.5 + 0.5 + s(-1) + s(-49) -> acc = 1 - s(-1) - s(-49)
    # row 2: rank = 1 + 2 s(-85) -> acc ~ 1 ; row 3: rank = 1.5 + s(85) ~ 2.5 -> acc 0
    acc = soft_accuracy(probs, labels, 100.0)
    np.testing.assert_allclose(
        acc, [1 - sigmoid(-1) - sigmoid(-49), 1 - 2 * sigmoid(-85), 0.0], rtol=0, atol=1e-15
    )


def test_dece_one_bin_hand_computed():
    # one bin: memberships (1 + 1e-6) / (1 + 2e-6) for every sample (the M + 1 normaliser)
    probs = np.array([[0.5, 0.49, 0.01]])
    acc = 1 - sigmoid(-1) - sigmoid(-49)
    expected = (1 + 1e-6) / (1 + 2e-6) * abs(acc - 0.5)
    assert dece(probs, np.array([0]), n_bins=1) == pytest.approx(expected, abs=1e-15)


def test_dece_hard_limit_is_ece():
    probs, labels = random_probs(3000, 10, 2)
    got = dece(probs, labels, tau_a=1e6, tau_b=1e-7)
    # residual: the 1e-6 membership smoothing over 15 bins
    assert got == pytest.approx(ece(probs, labels), abs=1e-4)


def test_dece_default_is_close_to_ece():
    probs, labels = random_probs(3000, 10, 3)
    assert abs(dece(probs, labels) - ece(probs, labels)) < 0.05


# ----------------------------------------------------------------------------- torch twins


@pytest.mark.parametrize("form", ["bin", "label_binned"])
@pytest.mark.parametrize("p", [1, 2])
def test_sb_ece_torch_matches_numpy_and_has_gradients(form, p):
    probs, labels = random_probs(500, 10, 4)
    logits = torch.tensor(np.log(probs), requires_grad=True)
    pt = torch.softmax(logits, dim=1)
    val = sb_ece_torch(pt, torch.from_numpy(labels), n_bins=15, temperature=0.01, p=p, form=form)
    assert val.ndim == 0
    assert float(val.detach()) == pytest.approx(
        sb_ece(probs, labels, temperature=0.01, p=p, form=form), abs=1e-12
    )
    val.backward()
    assert torch.isfinite(logits.grad).all()
    assert logits.grad.abs().sum() > 0


def test_dece_torch_matches_numpy_and_has_gradients():
    probs, labels = random_probs(500, 10, 5)
    logits = torch.tensor(np.log(probs), requires_grad=True)
    val = dece_torch(torch.softmax(logits, dim=1), torch.from_numpy(labels))
    assert val.ndim == 0
    assert float(val.detach()) == pytest.approx(dece(probs, labels), abs=1e-12)
    val.backward()
    assert torch.isfinite(logits.grad).all()
    assert logits.grad.abs().sum() > 0


def test_torch_versions_float32_gradients():
    torch.manual_seed(0)
    logits = torch.randn(256, 100, requires_grad=True)
    labels = torch.randint(0, 100, (256,))
    for fn in (sb_ece_torch, dece_torch):
        logits.grad = None
        fn(torch.softmax(logits * 3, dim=1), labels).backward()
        assert torch.isfinite(logits.grad).all()


def test_torch_temperature_scaling_reduces_sb_ece():
    # a tiny TS-SB-ECE: an overconfident model (logits x3) gets a temperature > 1
    rng = np.random.default_rng(6)
    n, k = 1000, 10
    true_logits = rng.standard_normal((n, k)) * 2
    p = np.exp(true_logits) / np.exp(true_logits).sum(1, keepdims=True)
    labels = torch.from_numpy((p.cumsum(1) < rng.random((n, 1))).sum(1).clip(max=k - 1))
    z = torch.from_numpy(true_logits * 3)
    log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([log_t], lr=0.1)
    before = float(sb_ece_torch(torch.softmax(z, 1), labels, temperature=0.01))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: threads only add contention
    try:
        for _ in range(60):
            opt.zero_grad()
            loss = sb_ece_torch(torch.softmax(z / log_t.exp(), 1), labels, temperature=0.01)
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    assert float(loss.detach()) < before / 2
    assert 2.0 < float(log_t.detach().exp()) < 4.5  # ~3 undoes the sharpening


@pytest.mark.parametrize(
    "probs,labels,match",
    [
        (np.eye(3), np.arange(3), "torch tensors"),
        (torch.eye(3)[0], torch.arange(3), "shape"),
        (torch.eye(3), torch.arange(2), "labels must have shape"),
        (torch.eye(3), torch.tensor([0.0, 1.0, 2.0]), "integer"),
        (torch.eye(3), torch.tensor([0, 1, 3]), r"\[0, 2\]"),
        (torch.eye(3) * float("nan"), torch.arange(3), "NaN"),
        (torch.eye(3) * 5, torch.arange(3), "logits"),
        (torch.eye(3) * 0.5, torch.arange(3), "sum to 1"),
        (torch.eye(3, dtype=torch.int64), torch.arange(3), "floating"),
    ],
)
def test_torch_versions_reject_bad_input(probs, labels, match):
    for fn in (sb_ece_torch, dece_torch):
        with pytest.raises(ValueError, match=match):
            fn(probs, labels)


def test_soft_options_rejected():
    p, y = np.eye(3), np.arange(3)
    with pytest.raises(ValueError, match="temperature"):
        sb_ece(p, y, temperature=0)
    with pytest.raises(ValueError, match="form"):
        sb_ece(p, y, form="lb")
    with pytest.raises(ValueError, match="p must"):
        sb_ece(p, y, p=0.5)
    with pytest.raises(ValueError, match="tau_a"):
        dece(p, y, tau_a=-1)
    with pytest.raises(ValueError, match="tau_b"):
        dece_torch(torch.eye(3), torch.arange(3), tau_b=float("inf"))
    with pytest.raises(ValueError, match="n_bins"):
        sb_ece_torch(torch.eye(3), torch.arange(3), n_bins=0)
