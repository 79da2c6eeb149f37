"""The CIFAR training split (paper-scale training studies) in torchvision's train=True order."""

import hashlib
import pickle

import numpy as np
import pytest

from calbench.data import cifar


def write_train(root, name, n_per_batch=4, seed=0):
    rng = np.random.default_rng(seed)
    spec = cifar.SPECS[name]
    folder = root / spec["folder"]
    folder.mkdir(parents=True, exist_ok=True)
    md5s, data, labels = [], [], []
    for fname, _ in spec["train_files"]:
        d = rng.integers(0, 256, size=(n_per_batch, 3 * 32 * 32), dtype=np.uint8)
        y = rng.integers(0, spec["num_classes"], size=n_per_batch).tolist()
        with open(folder / fname, "wb") as fh:
            pickle.dump({"data": d, spec["label_key"]: y}, fh)
        md5s.append(hashlib.md5((folder / fname).read_bytes()).hexdigest())
        data.append(d)
        labels += y
    return md5s, np.concatenate(data), labels


@pytest.mark.parametrize("name, n_batches", [("cifar10", 5), ("cifar100", 1)])
def test_train_split_concatenates_batches_in_file_order(tmp_path, name, n_batches):
    md5s, data, labels = write_train(tmp_path, name)
    images, y = cifar.read_cifar_train(name, tmp_path, md5s=md5s)
    assert images.shape == (4 * n_batches, 32, 32, 3) and y.tolist() == labels
    # image 5's pixel (row 1, col 2), channel c, sits at c*1024 + 1*32 + 2 of its CHW row
    i = min(5, 4 * n_batches - 1)
    assert images[i, 1, 2].tolist() == [int(data[i, c * 1024 + 34]) for c in range(3)]


def test_train_split_agrees_with_torchvision(tmp_path, monkeypatch):
    import torchvision

    write_train(tmp_path, "cifar10", n_per_batch=2, seed=3)
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "_load_meta", lambda self: None)
    tv = torchvision.datasets.CIFAR10(str(tmp_path), train=True, download=False)
    images, labels = cifar.read_cifar_train("cifar10", tmp_path, md5s=None)
    assert np.array_equal(images, tv.data) and labels.tolist() == list(tv.targets)


def test_train_split_checks_pinned_md5_before_unpickling(tmp_path):
    write_train(tmp_path, "cifar10")
    with pytest.raises(ValueError, match="does not match the pinned"):
        cifar.read_cifar_train("cifar10", tmp_path)  # test-made files are not the official ones


def test_load_split_serves_train_through_the_dataset_interface(tmp_path):
    md5s, _, labels = write_train(tmp_path, "cifar100", n_per_batch=6)
    ds = cifar.CifarDataset("cifar100", {"train_md5s": md5s})
    images, y = ds.load_split(tmp_path, "train")
    assert tuple(images.shape) == (6, 3, 32, 32) and y.tolist() == labels
    with pytest.raises(ValueError, match="split must be 'test' or 'train'"):
        ds.load_split(tmp_path, "val")


def test_missing_batch_names_the_file_and_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="data_batch_1 not found; run `calbench download-dataset"):
        cifar.read_cifar_train("cifar10", tmp_path)
