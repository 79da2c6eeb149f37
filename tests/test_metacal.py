"""Meta-Calibration trainer (Bohdal et al. 2021, Algorithm 1) on a tiny MLP with synthetic data."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from calbench.metacal import MetaCalibration, meta_calibration_split, paired_batches

pytest.importorskip("torch.func")


def _has_dece():
    try:
        from calbench.metrics.soft import dece_torch  # noqa: F401
    except ImportError:
        return False
    return True


needs_dece = pytest.mark.skipif(not _has_dece(), reason="calbench.metrics.soft not available yet")


class TinyNet(nn.Module):
    def __init__(self, d=2, h=8, k=3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d, h), nn.Tanh())
        self.fc = nn.Linear(h, k)

    def forward(self, x):
        return self.fc(self.body(x))


def _blobs(n, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    centres = torch.tensor([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    y = torch.randint(0, 3, (n,), generator=g)
    x = centres[y] + 0.8 * torch.randn(n, 2, generator=g)
    return x.to(dtype), y


def _make(variant="m2", seed=0, dtype=torch.float32, **kw):
    torch.manual_seed(seed)
    model = TinyNet().to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=kw.pop("lr", 0.05))
    return MetaCalibration(model, opt, variant=variant, **kw)


# ------------------------------------------------------------------ split


def test_split_sizes_and_partition():
    tr, va, me = meta_calibration_split(50000)
    assert (len(tr), len(va), len(me)) == (40000, 5000, 5000)
    allidx = np.concatenate([tr, va, me])
    assert np.array_equal(np.sort(allidx), np.arange(50000))
    assert tr.dtype == np.int64


def test_split_matches_list_shuffle_protocol():
    # the released loaders: indices = list(range(n)); np.random.seed(1); np.random.shuffle(indices)
    n = 1000
    state = np.random.get_state()  # noqa: NPY002
    try:
        np.random.seed(1)  # noqa: NPY002
        indices = list(range(n))
        np.random.shuffle(indices)  # noqa: NPY002
    finally:
        np.random.set_state(state)  # noqa: NPY002
    before = np.random.get_state()[1].copy()  # noqa: NPY002
    tr, va, me = meta_calibration_split(n, seed=1)
    assert np.array_equal(np.random.get_state()[1], before)  # noqa: NPY002
    assert va.tolist() == indices[:100]
    assert me.tolist() == indices[100:200]
    assert tr.tolist() == indices[200:]


def test_split_other_fractions_and_errors():
    tr, va, me = meta_calibration_split(100, seed=0, valid_size=0.1, meta_val_size=0.5)
    assert (len(tr), len(va), len(me)) == (85, 10, 5)
    with pytest.raises(ValueError, match="n must be"):
        meta_calibration_split(2)
    with pytest.raises(ValueError, match="valid_size"):
        meta_calibration_split(100, valid_size=1.5)
    with pytest.raises(ValueError, match="empty part"):
        meta_calibration_split(5, valid_size=0.1)


def test_paired_batches_restart_meta():
    pairs = list(paired_batches([1, 2, 3, 4, 5], ["a", "b"]))
    assert pairs == [(1, "a"), (2, "b"), (3, "a"), (4, "b"), (5, "a")]
    with pytest.raises(ValueError, match="empty"):
        list(paired_batches([1], []))


# ------------------------------------------------------------------ the pieces


def test_fast_weights_equal_manual_sgd_step():
    trainer = _make("m2", dtype=torch.float64, lr=0.3)
    with torch.no_grad():  # a non-zero omega so the regulariser's gradient is exercised
        trainer.omega[0].copy_(
            torch.linspace(-0.2, 0.5, trainer.omega[0].numel()).view_as(trainer.omega[0])
        )
        trainer.omega[1].copy_(torch.tensor([0.1, 0.0, 0.3], dtype=torch.float64))
    x, y = _blobs(12, 1, torch.float64)
    logits = trainer.model(x)
    fast = trainer.fast_weights(logits, y)
    # hand gradient of sum-CE + sum(omega * phi^2) for a linear layer on features h:
    # dL/dW = (softmax - onehot)^T h + 2 omega_W W;  dL/db = sum_i (softmax - onehot) + 2 omega_b b
    h = trainer.model.body(x).detach()
    W, b = trainer.model.fc.weight.detach(), trainer.model.fc.bias.detach()
    r = torch.softmax(h @ W.T + b, 1) - F.one_hot(y, 3).double()
    gW = r.T @ h + 2 * trainer.omega[0].detach() * W
    gb = r.sum(0) + 2 * trainer.omega[1].detach() * b
    assert set(fast) == {"fc.weight", "fc.bias"}
    assert torch.allclose(fast["fc.weight"], W - 0.3 * gW, rtol=1e-12, atol=1e-12)
    assert torch.allclose(fast["fc.bias"], b - 0.3 * gb, rtol=1e-12, atol=1e-12)
    assert fast["fc.weight"].requires_grad  # differentiable for the meta-gradient


def test_meta_objective_uses_fast_weights_on_meta_batch():
    trainer = _make("m2", dtype=torch.float64, lr=0.2)
    x, y = _blobs(16, 2, torch.float64)
    xv, yv = _blobs(16, 3, torch.float64)
    meta, _ = trainer.meta_objective((x, y), (xv, yv))
    fast = trainer.fast_weights(trainer.model(x), y)
    h = trainer.model.body(xv)
    expected = F.cross_entropy(h @ fast["fc.weight"].T + fast["fc.bias"], yv)
    assert meta.item() == pytest.approx(expected.item(), rel=1e-12)


def test_meta_gradient_matches_finite_differences():
    # gradcheck of omega -> CE meta-loss after one simulated step (float64)
    trainer = _make("m2", dtype=torch.float64, lr=0.5)
    x, y = _blobs(10, 4, torch.float64)
    xv, yv = _blobs(10, 5, torch.float64)
    w0 = torch.full_like(trainer.omega[0], 0.05).requires_grad_(True)
    w1 = torch.full_like(trainer.omega[1], 0.02).requires_grad_(True)

    def f(a, b):
        return trainer.meta_objective((x, y), (xv, yv), omega=[a, b])[0]

    assert torch.autograd.gradcheck(f, (w0, w1))


def test_omega_receives_gradient_and_adam_moves_it():
    trainer = _make("m2", dtype=torch.float64, lr=0.5)
    x, y = _blobs(32, 6, torch.float64)
    xv, yv = _blobs(32, 7, torch.float64)
    omega0 = [w.detach().clone() for w in trainer.omega]
    meta, _ = trainer.meta_objective((x, y), (xv, yv))
    g = torch.autograd.grad(meta, trainer.omega)
    assert all(gi.abs().max() > 0 for gi in g)
    out = trainer.step((x, y), (xv, yv))
    # Adam's first step moves each coordinate by lr * g / (|g| + eps) = -1e-3 sign(g)
    for w, w0, gi in zip(trainer.omega, omega0, g, strict=True):
        mask = gi.abs() > 1e-6
        assert torch.allclose((w - w0)[mask], -1e-3 * torch.sign(gi[mask]), rtol=1e-3)
    assert out["omega_abs_mean"] > 0
    assert np.isfinite(out["meta_loss"])


def test_base_update_is_clipped_sgd_on_regularised_loss():
    trainer = _make("m2", dtype=torch.float64, lr=0.1)
    x, y = _blobs(64, 8, torch.float64)
    xv, yv = _blobs(64, 9, torch.float64)
    before = copy.deepcopy(trainer.model)
    trainer.step((x, y), (xv, yv))
    omega_new = [w.detach() for w in trainer.omega]
    # expected: theta - lr * clip(grad(sum-CE + sum(omega_new * phi^2)), 2)
    loss = F.cross_entropy(before(x), y, reduction="sum")
    loss = loss + sum(
        (w * p.pow(2)).sum() for w, p in zip(omega_new, before.fc.parameters(), strict=True)
    )
    grads = torch.autograd.grad(loss, list(before.parameters()))
    norm = torch.sqrt(sum((g**2).sum() for g in grads))
    assert norm > 2.0  # the clip is active in this example
    coef = 2.0 / (norm + 1e-6)
    for p_new, p_old, g in zip(trainer.model.parameters(), before.parameters(), grads, strict=True):
        assert torch.allclose(p_new, p_old - 0.1 * coef * g, rtol=1e-10, atol=1e-12)


def test_meta_gradient_stays_out_of_the_network_unless_asked():
    x, y = _blobs(32, 10, torch.float64)
    xv, yv = _blobs(32, 11, torch.float64)
    clean = _make("m2", dtype=torch.float64, clip_norm=None)
    leaky = _make("m2", dtype=torch.float64, clip_norm=None, meta_grad_to_model=True)
    clean.step((x, y), (xv, yv))
    leaky.step((x, y), (xv, yv))
    # same omega update, different network update
    for a, b in zip(clean.omega, leaky.omega, strict=True):
        assert torch.allclose(a, b)
    assert not torch.allclose(clean.model.body[0].weight, leaky.model.body[0].weight)


# ------------------------------------------------------------------ training behaviour


@pytest.mark.parametrize(
    "variant",
    ["m0", "m2", pytest.param("metacal", marks=needs_dece), pytest.param("m1", marks=needs_dece)],
)
def test_training_objective_decreases(variant):
    trainer = _make(variant, lr=0.02)
    x, y = _blobs(256, 12)
    xv, yv = _blobs(64, 13)

    def objective():  # mean CE, plus DECE for the multi-task variant m1
        with torch.no_grad():
            z = trainer.model(x)
            out = F.cross_entropy(z, y).item()
            if variant == "m1":
                out += trainer.dece(z, y).item()
        return out

    before = objective()
    for i in range(40):
        sl = slice((i % 8) * 32, (i % 8 + 1) * 32)
        ml = slice((i % 2) * 32, (i % 2 + 1) * 32)
        out = trainer.step((x[sl], y[sl]), (xv[ml], yv[ml]))
        assert np.isfinite(out["loss"]) and np.isfinite(out["grad_norm"])
    assert objective() < 0.75 * before


@pytest.mark.parametrize("variant", ["m2", pytest.param("metacal", marks=needs_dece)])
def test_deterministic_with_seed(variant):
    def run():
        trainer = _make(variant, seed=5)
        x, y = _blobs(64, 14)
        for i in range(4):
            trainer.step((x[i * 16 : (i + 1) * 16], y[i * 16 : (i + 1) * 16]), (x[:16], y[:16]))
        return [p.detach().clone() for p in trainer.model.parameters()], [
            w.detach().clone() for w in trainer.omega
        ]

    (p1, w1), (p2, w2) = run(), run()
    assert all(torch.equal(a, b) for a, b in zip(p1 + w1, p2 + w2, strict=True))


def test_variant_m0_is_plain_sum_ce_and_ignores_omega():
    trainer = _make("m0", dtype=torch.float64)
    x, y = _blobs(16, 15, torch.float64)
    expected = F.cross_entropy(trainer.model(x), y, reduction="sum").item()
    out = trainer.step((x, y))
    assert out["loss"] == pytest.approx(expected, rel=1e-12)
    assert np.isnan(out["meta_loss"]) and out["omega_abs_mean"] == 0.0


@needs_dece
def test_variant_m1_is_ce_plus_dece_without_meta_learning():
    from calbench.losses import get_loss

    trainer = _make("m1", dtype=torch.float64, m1_beta=0.5)
    x, y = _blobs(16, 16, torch.float64)
    logits = trainer.model(x)
    expected = F.cross_entropy(logits, y, reduction="sum") + 0.5 * 16 * get_loss("dece")(logits, y)
    out = trainer.step((x, y))
    assert out["loss"] == pytest.approx(expected.item(), rel=1e-10)
    assert out["omega_abs_mean"] == 0.0


@needs_dece
def test_variant_metacal_meta_loss_is_dece():
    from torch.func import functional_call

    from calbench.losses import get_loss

    trainer = _make("metacal", dtype=torch.float64)
    x, y = _blobs(32, 17, torch.float64)
    xv, yv = _blobs(32, 18, torch.float64)
    fast = trainer.fast_weights(trainer.model(x), y)
    logits_v = functional_call(trainer.model, fast, (xv,), strict=False)
    expected = get_loss("dece", n_bins=15, tau_a=100, tau_b=0.01)(logits_v, yv).item()
    out = trainer.step((x, y), (xv, yv))
    assert out["meta_loss"] == pytest.approx(expected, rel=1e-10)
    assert out["omega_abs_mean"] > 0


def test_state_dict_round_trip():
    a = _make("m2")
    x, y = _blobs(32, 19)
    a.step((x[:16], y[:16]), (x[16:], y[16:]))
    b = _make("m2", seed=1)
    b.model.load_state_dict(a.model.state_dict())
    b.load_state_dict(a.state_dict())
    assert all(torch.equal(u, v) for u, v in zip(a.omega, b.omega, strict=True))
    a.step((x[16:], y[16:]), (x[:16], y[:16]))
    b.step((x[16:], y[16:]), (x[:16], y[:16]))
    assert all(
        torch.equal(u, v) for u, v in zip(a.model.parameters(), b.model.parameters(), strict=True)
    )


# ------------------------------------------------------------------ errors


def test_bad_construction_and_batches():
    model = TinyNet()
    with pytest.raises(ValueError, match="variant"):
        MetaCalibration(model, variant="m9")
    with pytest.raises(ValueError, match="no submodule"):
        MetaCalibration(model, classifier="head")
    with pytest.raises(ValueError, match="not nn.Linear"):
        MetaCalibration(model, classifier="body")
    with pytest.raises(ValueError, match="nn.Module"):
        MetaCalibration("model")
    t = MetaCalibration(model, variant="m2")
    x, y = _blobs(8, 0)
    with pytest.raises(ValueError, match="needs a meta_batch"):
        t.step((x, y))
    with pytest.raises(ValueError, match="pair"):
        t.step(x, (x, y))
    with pytest.raises(ValueError, match="one class index"):
        t.step((x, y[:4]), (x, y))
    with pytest.raises(ValueError, match="variant"):
        MetaCalibration(TinyNet(), variant="m0").load_state_dict(t.state_dict())


def test_nested_classifier_name():
    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = TinyNet()

        def forward(self, x):
            return self.net(x)

    torch.manual_seed(0)
    m = Wrapped()
    t = MetaCalibration(
        m, torch.optim.SGD(m.parameters(), lr=0.1), variant="m2", classifier="net.fc"
    )
    x, y = _blobs(16, 20)
    out = t.step((x, y), (x, y))
    assert np.isfinite(out["loss"]) and t.omega[0].shape == m.net.fc.weight.shape
