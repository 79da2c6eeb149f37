"""Tests of calbench.training.loop: the training loop of each method, step by step."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from calbench.training import (
    META_COLUMNS,
    VAL_COLUMNS,
    TrainingConfig,
    build_objective,
    final_linear,
    parse_training,
    train,
    validation_metrics,
)

sys.path.insert(0, str(Path(__file__).parent))
from training_toys import _ce, _identity, _linear, _mlp, _separable, _toy  # noqa: E402


def test_one_full_batch_sgd_step_is_the_hand_computed_gradient_step():
    images, labels = _toy()
    model = _linear()
    W = model[1].weight.detach().double().numpy().copy()
    b = model[1].bias.detach().double().numpy().copy()
    cfg = TrainingConfig(epochs=1, batch_size=12, lr=0.1, momentum=0.0)
    hist = train(model, images, labels, loss_fn=_ce, preprocess=_identity, config=cfg)
    # softmax cross-entropy: dL/dz = (softmax(z) - onehot) / n
    X = images.reshape(12, 4).double().numpy()
    z = X @ W.T + b
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    Y = np.eye(3)[labels.numpy()]
    G = (p - Y) / 12
    np.testing.assert_allclose(
        model[1].weight.detach().numpy(), W - 0.1 * G.T @ X, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        model[1].bias.detach().numpy(), b - 0.1 * G.sum(0), rtol=1e-5, atol=1e-6
    )
    # the recorded loss is the pre-step cross-entropy of the batch, accuracy its argmax hits
    expected_loss = -np.log(p[np.arange(12), labels.numpy()]).mean()
    assert hist[0]["loss"] == pytest.approx(expected_loss, rel=1e-5)
    assert hist[0]["accuracy"] == pytest.approx(np.mean(z.argmax(1) == labels.numpy()))
    assert not model.training


def test_first_adam_step_moves_each_weight_by_lr_times_the_gradient_sign():
    images, labels = _toy()
    model = _linear()
    ref = _linear()
    nn.functional.cross_entropy(ref(images.float()), labels).backward()
    g = ref[1].weight.grad.detach()
    w0 = ref[1].weight.detach().clone()
    cfg = TrainingConfig(epochs=1, batch_size=12, lr=0.01, optimizer="adam")
    train(model, images, labels, loss_fn=_ce, preprocess=_identity, config=cfg)
    expected = w0 - 0.01 * g / (g.abs() + 1e-8)
    torch.testing.assert_close(model[1].weight.detach(), expected, rtol=1e-5, atol=1e-6)


def test_same_seed_same_weights_different_seed_different_batches():
    images, labels = _toy(n=40)
    cfg = TrainingConfig(epochs=3, batch_size=8, lr=0.05, seed=3)
    runs = []
    for seed in (3, 3, 4):
        model = _linear()
        hist = train(
            model,
            images,
            labels,
            loss_fn=_ce,
            preprocess=_identity,
            config=TrainingConfig(**{**cfg.to_dict(), "seed": seed}),
        )
        runs.append((model[1].weight.detach().clone(), [h["loss"] for h in hist]))
    assert torch.equal(runs[0][0], runs[1][0]) and runs[0][1] == runs[1][1]
    assert not torch.equal(runs[0][0], runs[2][0])


def test_a_separable_toy_problem_is_learned_and_history_has_one_row_per_epoch():
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(200) % 4
    images = torch.randint(0, 30, (200, 1, 2, 2), generator=g, dtype=torch.uint8)
    images.view(200, 4)[torch.arange(200), labels] += 200  # the bright pixel is the class
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 4))
    cfg = TrainingConfig(epochs=15, batch_size=20, lr=0.05, schedule="cosine")
    hist = train(
        model, images, labels, loss_fn=_ce, preprocess=lambda b: b.float() / 255, config=cfg
    )
    assert [h["epoch"] for h in hist] == list(range(1, 16))
    assert hist[-1]["accuracy"] == 1.0 and hist[-1]["loss"] < hist[0]["loss"] / 5
    # cosine decay: the last of 150 steps used lr * (1 + cos(pi * 149 / 150)) / 2
    assert hist[-1]["lr"] == pytest.approx(0.025 * (1 + math.cos(math.pi * 149 / 150)))
    with torch.no_grad():
        assert (model(images.float() / 255).argmax(1) == labels).all()


def test_divergence_is_reported():
    images, labels = _toy()
    model = _linear()

    def nan_loss(logits, targets):
        return logits.sum() * float("nan")

    with pytest.raises(ValueError, match="training diverged in epoch 1"):
        train(
            model,
            images,
            labels,
            loss_fn=nan_loss,
            preprocess=_identity,
            config=TrainingConfig(epochs=1),
        )


def test_deterministic_mode_is_restored_after_training():
    before = torch.are_deterministic_algorithms_enabled()
    images, labels = _toy()
    train(
        _linear(),
        images,
        labels,
        loss_fn=_ce,
        preprocess=_identity,
        config=TrainingConfig(epochs=1),
    )
    assert torch.are_deterministic_algorithms_enabled() == before


def test_multistep_schedule_decays_at_the_milestones():
    cfg = TrainingConfig(lr=0.1, schedule="multistep", milestones=(2, 4), lr_decay=0.1)
    assert [cfg.lr_at(0, 10, e) for e in (1, 2, 3, 4, 5)] == pytest.approx(
        [0.1, 0.1, 0.01, 0.01, 0.001]
    )
    images, labels = _toy(n=24)
    cfg = TrainingConfig(epochs=5, batch_size=24, lr=0.1, schedule="multistep", milestones=(2, 4))
    hist = train(_linear(), images, labels, preprocess=_identity, config=cfg)
    assert [h["lr"] for h in hist] == pytest.approx([0.1, 0.1, 0.01, 0.01, 0.001])


def test_standard_training_with_a_secondary_loss_is_one_hand_step():
    # one full-batch SGD step on CE + beta * DECE equals the step on the autograd gradient
    from calbench.losses import get_loss

    images, labels = _toy()
    cfg = parse_training(
        {
            "epochs": 1,
            "batch_size": 12,
            "lr": 0.1,
            "momentum": 0.0,
            "secondary": {"name": "dece", "beta": 2.0},
        }
    )
    ref = _linear()
    x = images.float()
    loss = nn.functional.cross_entropy(ref(x), labels) + 2.0 * get_loss("dece")(ref(x), labels)
    loss.backward()
    want = ref[1].weight.detach() - 0.1 * ref[1].weight.grad
    model = _linear()
    hist = train(model, images, labels, preprocess=_identity, config=cfg)
    torch.testing.assert_close(model[1].weight.detach(), want, rtol=1e-5, atol=1e-6)
    assert hist[0]["loss"] == pytest.approx(float(loss.detach()), rel=1e-5)


def test_interleaved_epoch_is_primary_on_majority_then_secondary_on_holdout(monkeypatch):
    from calbench.losses import InterleavedObjective, interleaved_split

    images, labels = _separable(n=100)
    cfg = parse_training(
        {
            "epochs": 2,
            "batch_size": 16,
            "lr": 0.05,
            "method": "interleaved",
            "holdout_fraction": 0.2,
            "secondary": {"name": "sbece", "beta": 1.0, "kwargs": {"temperature": 0.01}},
        }
    )
    obj = build_objective(cfg)
    assert isinstance(obj, InterleavedObjective)
    seen = []
    orig = obj.forward

    def spy(logits, targets, phase="primary"):
        seen.append((phase, tuple(targets.tolist())))
        return orig(logits, targets, phase=phase)

    monkeypatch.setattr(obj, "forward", spy)
    hist = train(_mlp(), images, labels, loss_fn=obj, preprocess=_identity, config=cfg)
    major, held = interleaved_split(100, 0.2, 0)
    # per epoch: ceil(80 / 16) = 5 primary batches, then ceil(20 / 16) = 2 secondary batches
    phases = [p for p, _ in seen]
    assert phases == (["primary"] * 5 + ["secondary"] * 2) * 2
    held_labels = sorted(labels[torch.from_numpy(held)].tolist())
    got = sorted(sum((list(t) for p, t in seen[5:7]), []))
    assert got == held_labels  # the secondary phase visits exactly the held-out samples
    assert obj.counts == {"primary": 10, "secondary": 4} and len(hist) == 2


def test_metacal_training_runs_algorithm_1_on_its_split_and_records_validation():
    from calbench.metacal import MetaCalibration, meta_calibration_split

    images, labels = _separable(n=200)
    spec = {
        "epochs": 2,
        "batch_size": 32,
        "lr": 0.05,
        "method": "metacal",
        "metacal": {"variant": "metacal", "reduction": "mean"},
    }
    cfg = parse_training(spec)
    model = _mlp()
    hist = train(model, images, labels, preprocess=lambda b: b.float() / 255, config=cfg)
    assert set(META_COLUMNS + VAL_COLUMNS) <= set(hist[0])
    assert hist[-1]["omega_abs_mean"] > 0  # omega moved away from its initial 0
    assert all(math.isfinite(h["meta_loss"]) for h in hist)
    # the validation columns are the metrics of the 10 % validation part of the split
    _, va, _ = meta_calibration_split(200, seed=1)
    z = model(images[torch.from_numpy(va)].float() / 255).detach().numpy()
    want = validation_metrics(z, labels[torch.from_numpy(va)].numpy())
    for k, v in want.items():
        assert hist[-1][k] == pytest.approx(v, rel=1e-6, abs=1e-9)
    # same seed, same run; and the first step equals one MetaCalibration.step by hand
    again = _mlp()
    train(again, images, labels, preprocess=lambda b: b.float() / 255, config=cfg)
    for a, b in zip(model.parameters(), again.parameters(), strict=True):
        assert torch.equal(a, b)
    assert final_linear(model) == "3"
    one = parse_training({**spec, "epochs": 1, "batch_size": 160})  # one batch = the train part
    m1, m2 = _mlp(), _mlp()
    train(m1, images, labels, preprocess=lambda b: b.float() / 255, config=one)
    tr, _, me = meta_calibration_split(200, seed=1)
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    order = torch.from_numpy(tr)[torch.randperm(160, generator=g)]
    morder = torch.from_numpy(me)[torch.randperm(20, generator=g)]
    opt = torch.optim.SGD(m2.parameters(), lr=0.05, momentum=0.9)
    mc = MetaCalibration(m2, opt, classifier="3", reduction="mean")
    x = images.float() / 255
    mc.step((x[order], labels[order]), (x[morder], labels[morder]))
    for a, b in zip(m1.parameters(), m2.parameters(), strict=True):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize(
    "arch, training",
    [
        ("resnet8_tiny", {"method": "metacal", "metacal": {"variant": "metacal"}}),
        (
            "wrn10_1",
            {
                "method": "interleaved",
                "secondary": {"name": "savuc", "beta": 1.0, "kwargs": {"kappa": 0.2}},
                "amp": True,
            },
        ),
        ("wrn10_1", {"secondary": {"name": "sbece", "beta": 1.0}, "grad_clip": 2.0}),
    ],
)
def test_paper_scale_code_path_on_a_tiny_synthetic_cifar(arch, training):
    from calbench.models.cifar_train import ARCHITECTURES

    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (60, 3, 32, 32), generator=g, dtype=torch.uint8)
    labels = torch.arange(60) % 10
    cfg = parse_training(
        {
            "epochs": 2,
            "batch_size": 16,
            "lr": 0.1,
            "weight_decay": 5e-4,
            "schedule": "multistep",
            "milestones": [1],
            **training,
        }
    )
    torch.manual_seed(0)
    model = ARCHITECTURES[arch](num_classes=10)
    val = (images[:20], labels[:20])
    hist = train(
        model, images, labels, preprocess=lambda b: b.float() / 255 - 0.5, config=cfg, val=val
    )
    assert len(hist) == 2 and all(math.isfinite(h["loss"]) for h in hist)
    assert hist[1]["lr"] == pytest.approx(0.01)
    assert 0 <= hist[-1]["val_ece"] <= 1 and 0 <= hist[-1]["val_dece"] <= 1


def test_meta_batches_are_drawn_when_needed_and_continued_in_the_next_epoch():
    # Meta-Calibration pairs every training batch with a meta-validation batch
    # (calbench.metacal.paired_batches); a new shuffle is drawn only when one is used up, and
    # the batches an epoch leaves are the next epoch's first
    from calbench.metacal import paired_batches
    from calbench.training.loop import _batches, _MetaBatches

    idx = torch.arange(10, 15)
    gen = torch.Generator().manual_seed(0)
    meta = _MetaBatches(idx, 2, gen, "cpu")  # 3 batches per shuffle
    first = [m for _, m in paired_batches(range(4), meta)]  # one whole shuffle + 1
    second = [m for _, m in paired_batches(range(2), meta)]  # the 2 left of the second
    ref = torch.Generator().manual_seed(0)
    want = _batches(idx, 2, ref, "cpu") + _batches(idx, 2, ref, "cpu")
    assert len(first + second) == len(want)
    assert all(torch.equal(a, b) for a, b in zip(first + second, want, strict=True))
    assert torch.equal(gen.get_state(), ref.get_state())  # no shuffle drawn ahead of need


def test_a_conv_net_trains_channels_last_on_cpu_and_is_returned_in_the_default_layout(
    monkeypatch,
):
    import calbench.training.loop as loop

    original, seen = loop._channels_last, []

    class Probe(nn.Module):
        def forward(self, x):
            return x

    def net():
        torch.manual_seed(0)
        return nn.Sequential(
            nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3), Probe()
        )

    rng = np.random.default_rng(0)
    images = torch.from_numpy(rng.integers(0, 255, (30, 1, 8, 8), dtype=np.uint8))
    labels = torch.from_numpy(rng.integers(0, 3, 30))
    cfg = TrainingConfig(epochs=2, batch_size=10, lr=0.05, seed=1)
    prep = lambda b: b.float() / 255  # noqa: E731

    def record(module, args, out):
        seen.append(module.weight.is_contiguous(memory_format=torch.channels_last))

    fast = net()
    fast[0].register_forward_hook(record)
    train(fast, images, labels, loss_fn=_ce, preprocess=prep, config=cfg)
    assert seen and all(seen)  # every step ran in channels-last layout
    assert fast[0].weight.is_contiguous()  # the checkpoint keeps the default layout
    monkeypatch.setattr(loop, "_channels_last", lambda model, device: False)
    plain = net()
    train(plain, images, labels, loss_fn=_ce, preprocess=prep, config=cfg)
    torch.testing.assert_close(fast[0].weight, plain[0].weight, rtol=1e-5, atol=1e-6)
    assert original(net(), "cpu") and not original(net(), "cuda")
    assert not original(nn.Sequential(nn.Linear(2, 2)), "cpu")
