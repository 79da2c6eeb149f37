import csv
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from calbench.training import (
    HISTORY_COLUMNS,
    TrainingConfig,
    parse_training,
    train,
    train_from_spec,
    write_history,
)

DEBIAN = Path("/usr/share/datasets/fashion-mnist")


def _identity(batch):
    return batch.to(torch.float32)


def _linear(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(4, 3))


def _toy(n=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 4, (n, 1, 2, 2), generator=g, dtype=torch.uint8)
    labels = torch.arange(n) % 3
    return images, labels


def _ce(logits, targets):
    return nn.functional.cross_entropy(logits, targets)


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


def test_parse_training_defaults_and_errors():
    cfg = parse_training(
        {"loss": "focal", "loss_kwargs": {"gamma": 3}, "epochs": 2, "lr": 1, "train_subset": 100}
    )
    assert cfg.loss == "focal" and cfg.loss_kwargs == {"gamma": 3} and cfg.lr == 1.0
    assert cfg.optimizer == "sgd" and cfg.weight_decay == 0.0 and cfg.train_subset == 100
    assert parse_training({}).train_subset is None
    for bad, match in [
        ({"epochs": 0}, "epochs must be an integer >= 1"),
        ({"epochs": 2.5}, "epochs must be an integer"),
        ({"lr": 0}, "lr must be > 0"),
        ({"lr": float("nan")}, "lr must be a finite number"),
        ({"weight_decay": -1}, "weight_decay must be >= 0"),
        ({"optimizer": "rmsprop"}, "optimizer must be one of"),
        ({"schedule": "step"}, "schedule must be one of"),
        ({"epoch": 3}, r"unknown training keys \['epoch'\]"),
        ({"loss_kwargs": [1]}, "loss_kwargs must be a mapping"),
        ("ce", "training must be a mapping"),
    ]:
        with pytest.raises(ValueError, match=match):
            parse_training(bad)


def test_write_history_csv(tmp_path):
    rows = [{"epoch": 1, "loss": 0.25, "accuracy": 0.5, "lr": 0.1, "seconds": 1.5}]
    write_history(tmp_path / "h.csv", rows)
    with open(tmp_path / "h.csv") as fh:
        read = list(csv.DictReader(fh))
    assert tuple(read[0]) == HISTORY_COLUMNS
    assert {k: float(v) for k, v in read[0].items()} == rows[0]


@pytest.fixture(scope="module")
def fmnist_root(tmp_path_factory):
    if not (DEBIAN / "t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Debian package dataset-fashion-mnist is not installed")
    from calbench.data import fashion_mnist

    root = tmp_path_factory.mktemp("fm")
    fashion_mnist.prepare(root, mirrors=[DEBIAN], urls=())
    return root


def test_train_from_spec_on_a_fashion_mnist_subset(fmnist_root):
    spec = {
        "dataset": "fashion_mnist",
        "source": "train",
        "arch": "mlp",
        "training": {
            "loss": "ce",
            "epochs": 2,
            "batch_size": 50,
            "lr": 0.05,
            "seed": 0,
            "train_subset": 200,
        },
    }
    m1, h1, cfg = train_from_spec(spec, fmnist_root, device="cpu")
    m2, h2, _ = train_from_spec(spec, fmnist_root, device="cpu")
    assert cfg.train_subset == 200 and len(h1) == 2
    assert h1 == [dict(h, seconds=a["seconds"]) for h, a in zip(h2, h1, strict=True)]
    for (k, v), w in zip(m1.state_dict().items(), m2.state_dict().values(), strict=True):
        assert torch.equal(v, w), k
    assert h1[1]["loss"] < h1[0]["loss"]


def test_train_from_spec_errors(fmnist_root):
    base = {"dataset": "fashion_mnist", "source": "train", "arch": "mlp"}
    with pytest.raises(ValueError, match="no 'training' entry"):
        train_from_spec(base, fmnist_root)
    with pytest.raises(ValueError, match="exceeds the 60000 training images"):
        train_from_spec({**base, "training": {"train_subset": 60001}}, fmnist_root, device="cpu")
    with pytest.raises(ValueError, match="loss"):
        train_from_spec({**base, "training": {"loss": "no_such_loss"}}, fmnist_root, device="cpu")
