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
    rows = [{"epoch": 1, "loss": 0.25, "accuracy": 0.5, "lr": 0.1}]
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
    assert h1 == h2  # no wall-clock times: identical runs, identical histories
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


# ------------------------------------------------------------------------------------------
# calibration during training: secondary losses, interleaving, Meta-Calibration, validation
# ------------------------------------------------------------------------------------------
from calbench.training import (  # noqa: E402
    META_COLUMNS,
    VAL_COLUMNS,
    build_objective,
    final_linear,
    validation_metrics,
)


def _separable(n=120, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % k
    images = torch.randint(0, 60, (n, 1, 2, 2), generator=g, dtype=torch.uint8)
    images.view(n, 4)[torch.arange(n), labels] += 150
    return images, labels


def _mlp(seed=0, k=3):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, k))


def test_parse_training_calibration_keys_and_errors():
    cfg = parse_training(
        {
            "method": "interleaved",
            "secondary": {"name": "sbece", "beta": 0.5, "kwargs": {"temperature": 0.01}},
            "holdout_fraction": 0.2,
            "schedule": "multistep",
            "milestones": [2, 4],
            "val_size": 10,
        }
    )
    assert cfg.method == "interleaved" and cfg.secondary["beta"] == 0.5
    assert cfg.milestones == (2, 4) and cfg.holdout_fraction == 0.2 and cfg.val_size == 10
    mc = parse_training({"method": "metacal", "metacal": {"variant": "m2", "split_seed": 3}})
    assert mc.metacal == {"variant": "m2", "split_seed": 3}
    for bad, match in [
        ({"method": "maml"}, "method must be one of"),
        ({"method": "interleaved"}, "interleaved needs training.secondary"),
        ({"secondary": {"beta": 1}}, "secondary must be a mapping"),
        ({"secondary": {"name": "sbece", "lam": 1}}, r"unknown keys \['lam'\]"),
        ({"secondary": {"name": "sbece", "beta": -1}}, "secondary.beta must be >= 0"),
        (
            {"secondary": {"name": "sbece"}, "loss_kwargs": {"secondary": {"name": "dece"}}},
            "give the secondary loss once",
        ),
        ({"metacal": {"variant": "m1"}}, "need method: metacal"),
        ({"method": "metacal", "metacal": {"lr": 1}}, r"unknown training.metacal keys \['lr'\]"),
        ({"method": "metacal", "loss": "focal"}, "method: metacal trains cross-entropy"),
        ({"milestones": [3]}, "needs schedule: multistep"),
        ({"schedule": "multistep", "milestones": [4, 2]}, "must increase strictly"),
        ({"holdout_fraction": 1.0}, "holdout_fraction must be < 1"),
        ({"val_size": -1}, "val_size must be an integer >= 0"),
        ({"amp": "yes"}, "amp must be true or false"),
    ]:
        with pytest.raises(ValueError, match=match):
            parse_training(bad)


def test_multistep_schedule_decays_at_the_milestones():
    cfg = TrainingConfig(lr=0.1, schedule="multistep", milestones=(2, 4), lr_decay=0.1)
    assert [cfg.lr_at(0, 10, e) for e in (1, 2, 3, 4, 5)] == pytest.approx(
        [0.1, 0.1, 0.01, 0.01, 0.001]
    )
    images, labels = _toy(n=24)
    cfg = TrainingConfig(epochs=5, batch_size=24, lr=0.1, schedule="multistep", milestones=(2, 4))
    hist = train(_linear(), images, labels, preprocess=_identity, config=cfg)
    assert [h["lr"] for h in hist] == pytest.approx([0.1, 0.1, 0.01, 0.01, 0.001])


def test_secondary_objective_is_primary_plus_beta_times_secondary():
    from calbench.losses import get_loss

    cfg = parse_training(
        {"loss": "focal", "loss_kwargs": {"gamma": 2.0}, "secondary": {"name": "dece", "beta": 0.7}}
    )
    obj = build_objective(cfg)
    z = torch.randn(32, 3, generator=torch.Generator().manual_seed(1))
    y = torch.arange(32) % 3
    want = get_loss("focal", gamma=2.0)(z, y) + 0.7 * get_loss("dece")(z, y)
    torch.testing.assert_close(obj(z, y), want)
    # the loss_kwargs spelling builds the same objective
    alt = build_objective(
        parse_training(
            {
                "loss": "focal",
                "loss_kwargs": {"gamma": 2.0, "secondary": {"name": "dece", "beta": 0.7}},
            }
        )
    )
    torch.testing.assert_close(alt(z, y), want)


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


def test_validation_metrics_match_the_library_metrics():
    from calbench.functional import softmax
    from calbench.metrics import dece, ece

    rng = np.random.default_rng(0)
    z = rng.normal(size=(300, 4)) * 3
    y = rng.integers(0, 4, 300)
    got = validation_metrics(z, y)
    p = softmax(z, axis=1)
    assert got["val_ece"] == pytest.approx(ece(p, y))
    assert got["val_dece"] == pytest.approx(dece(p, y))
    assert got["val_accuracy"] == pytest.approx(np.mean(z.argmax(1) == y))
    assert got["val_nll"] == pytest.approx(-np.mean(np.log(p[np.arange(300), y])), rel=1e-6)


def test_write_history_adds_validation_columns(tmp_path):
    rows = [
        {"epoch": 1, "loss": 0.5, "accuracy": 0.5, "lr": 0.1, "val_ece": 0.1},
        {"epoch": 2, "loss": 0.4, "accuracy": 0.6, "lr": 0.1},
    ]
    write_history(tmp_path / "h.csv", rows)
    with open(tmp_path / "h.csv") as fh:
        read = list(csv.DictReader(fh))
    assert list(read[0]) == [*HISTORY_COLUMNS, "val_ece"]
    assert float(read[0]["val_ece"]) == 0.1 and math.isnan(float(read[1]["val_ece"]))


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


def test_train_from_spec_holds_out_val_size_images(fmnist_root):
    spec = {
        "dataset": "fashion_mnist",
        "source": "train",
        "arch": "mlp",
        "training": {
            "epochs": 1,
            "batch_size": 100,
            "seed": 0,
            "train_subset": 200,
            "val_size": 300,
        },
    }
    model, hist, cfg = train_from_spec(spec, fmnist_root, device="cpu")
    from calbench.data import fashion_mnist

    images, labels = fashion_mnist.load_split(fmnist_root, "train")
    z = model(fashion_mnist.preprocessor()(images[-300:])).detach().numpy()
    want = validation_metrics(z, labels[-300:].numpy())
    assert hist[0]["val_ece"] == pytest.approx(want["val_ece"], rel=1e-6)
    with pytest.raises(ValueError, match="left after val_size 300; lower it"):
        train_from_spec(
            {**spec, "training": {**spec["training"], "train_subset": 59800}},
            fmnist_root,
            device="cpu",
        )
