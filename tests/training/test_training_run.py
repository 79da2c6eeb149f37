"""Tests of calbench.training.run: training a Fashion-MNIST spec (the Debian dataset package)."""


import pytest
import torch

from calbench.training import train_from_spec, validation_metrics


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
