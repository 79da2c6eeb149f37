"""CIFAR-10 / CIFAR-100 (Krizhevsky 2009) in torchvision's ``CIFAR10/100(train=False/True)`` order.

The archives are fetched with their pinned MD5 (torchvision's values) and unpacked under
``<root>``; the test batch is read with pickle exactly as torchvision does (rows of the batch in
file order, CHW bytes -> HWC uint8; ``labels`` for CIFAR-10, ``fine_labels`` for CIFAR-100) and
its own MD5 is checked before use. No torch import: the dataset object is a plain map-style
sequence that ``torch.utils.data.DataLoader`` accepts.
"""

from __future__ import annotations

import os
import pickle
import tarfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from calbench.data.base import Dataset, check_options
from calbench.data.download import fetch, verify
from calbench.data.preprocessing import uint8_preprocessor

SPECS = {
    "cifar10": {
        "archive": "cifar-10-python.tar.gz",
        "urls": ["https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"],
        "md5": "c58f30108f718f92721af3b95e74349a",
        "folder": "cifar-10-batches-py",
        "test_file": "test_batch",
        "test_md5": "40351d587109b95175f43aff81a1287e",
        # the training batches, in torchvision's CIFAR10(train=True) order, with its MD5s
        "train_files": [
            ("data_batch_1", "c99cafc152244af753f735de768cd75f"),
            ("data_batch_2", "d4bba439e000b95fd0a9bffe97cbabec"),
            ("data_batch_3", "54ebc095f3ab1f0389bbae665268c751"),
            ("data_batch_4", "634d18415352ddfa80567beed471001a"),
            ("data_batch_5", "482c414d41f54cd18b22e5b47cb7c3cb"),
        ],
        "label_key": "labels",
        "num_classes": 10,
    },
    "cifar100": {
        "archive": "cifar-100-python.tar.gz",
        "urls": ["https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"],
        "md5": "eb9058c3a382ffc7106e4002c42a8d85",
        "folder": "cifar-100-python",
        "test_file": "test",
        "test_md5": "f0ef6b0ae62326f3e7ffdfab6717acfc",
        "train_files": [("train", "16019d7e3df5f24257cddd939b257f8d")],
        "label_key": "fine_labels",
        "num_classes": 100,
    },
}


def _spec(name: str) -> dict:
    if name not in SPECS:
        raise ValueError(f"unknown CIFAR dataset {name!r}; use one of {sorted(SPECS)}")
    return SPECS[name]


def download_cifar(
    name: str,
    root: str | os.PathLike,
    mirrors: Iterable[str | os.PathLike] = (),
    timeout: float = 60.0,
) -> Path:
    """Fetch the MD5-pinned archive into ``root`` (mirrors first) and unpack it; return the folder."""
    spec = _spec(name)
    return _fetch_and_extract(spec, root, urls=spec["urls"], mirrors=mirrors, timeout=timeout)


def _fetch_and_extract(
    spec: dict,
    root: str | os.PathLike,
    *,
    urls: Iterable[str],
    mirrors: Iterable[str | os.PathLike],
    timeout: float,
) -> Path:
    """Fetch ``spec``'s archive (its ``md5``) into ``root``, unpack it unless its test batch is
    already there, check the test batch's ``test_md5``; return the unpacked folder."""
    root = Path(root)
    archive = fetch(
        root / spec["archive"], urls=urls, mirrors=mirrors, md5=spec["md5"], timeout=timeout
    )
    folder = root / spec["folder"]
    test = folder / spec["test_file"]
    if not test.is_file():
        with tarfile.open(archive) as tf:
            tf.extractall(root, filter="data")
    verify(test, md5=spec["test_md5"])
    return folder


def read_cifar_test(
    name: str, root: str | os.PathLike, md5: str | None = "pinned"
) -> tuple[np.ndarray, np.ndarray]:
    """Images ``(10000, 32, 32, 3)`` uint8 and labels ``(10000,)`` int64 in torchvision's order.

    ``md5="pinned"`` checks the test batch against the published MD5; pass another digest for
    a file you made yourself, or None to skip the check.
    """
    spec = _spec(name)
    path = Path(root) / spec["folder"] / spec["test_file"]
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found; run `calbench download-dataset {name}` or `calbench stage`, "
            f"or unpack {spec['archive']} into {root}"
        )
    return _read_batch(path, spec["test_md5"] if md5 == "pinned" else md5, spec["label_key"])


def _read_batch(path: Path, md5: str | None, label_key: str) -> tuple[np.ndarray, np.ndarray]:
    """One python-pickle batch (verified against ``md5`` BEFORE unpickling) as HWC uint8 + labels."""
    verify(path, md5=md5)
    with open(path, "rb") as fh:
        entry = pickle.load(fh, encoding="latin1")
    data = np.asarray(entry["data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    labels = np.asarray(entry[label_key], dtype=np.int64)
    if labels.shape[0] != data.shape[0]:
        raise ValueError(
            f"{path}: {data.shape[0]} images but {labels.shape[0]} labels; the file is damaged"
        )
    return np.ascontiguousarray(data), labels


def read_cifar_train(
    name: str, root: str | os.PathLike, md5s: str | list | None = "pinned"
) -> tuple[np.ndarray, np.ndarray]:
    """The training set (50,000 images) in torchvision's ``train=True`` order: the batches
    concatenated in file order. ``md5s="pinned"`` checks each batch against torchvision's MD5;
    pass a list (one per batch) for files you made yourself, or None to skip the check."""
    spec = _spec(name)
    files = spec["train_files"]
    if md5s not in ("pinned", None) and len(md5s) != len(files):
        raise ValueError(f"{name}: give one MD5 per training batch ({len(files)}), got {len(md5s)}")
    parts = []
    for i, (fname, pinned) in enumerate(files):
        path = Path(root) / spec["folder"] / fname
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found; run `calbench download-dataset --dataset {name}` or unpack "
                f"{spec['archive']} into {root}"
            )
        md5 = pinned if md5s == "pinned" else (None if md5s is None else md5s[i])
        parts.append(_read_batch(path, md5, spec["label_key"]))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def sample_ids(name: str, n: int) -> list[str]:
    """Sample identities in order (``cifar10/test/00000`` ...): the input of the order hash."""
    return [f"{name}/test/{i:05d}" for i in range(n)]


class ArrayImageDataset:
    """Map-style dataset over uint8 HWC images: ``(transform(PIL image), label)``."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, transform=None, ids=None):
        self.images, self.labels, self.transform = images, labels, transform
        self.ids = ids if ids is not None else [str(i) for i in range(len(labels))]

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def __getitem__(self, i: int):
        from PIL import Image

        img = Image.fromarray(self.images[i])
        return (self.transform(img) if self.transform else img), int(self.labels[i])


def cifar_test_dataset(
    name: str, root: str | os.PathLike, transform=None, md5: str | None = "pinned"
):
    """The CIFAR test set as a map-style dataset (torchvision order) with ``ids``."""
    images, labels = read_cifar_test(name, root, md5=md5)
    return ArrayImageDataset(images, labels, transform, sample_ids(name, len(labels)))


#: Dataset config keys a CIFAR entry may override (e.g. a test-made archive and its MD5s).
OPTION_KEYS = ("archive", "urls", "md5", "test_md5", "train_md5s", "size_mb")

#: Download sizes (MiB) of the official archives, for ``calbench stage --dry-run``.
SIZES_MB = {"cifar10": 163, "cifar100": 161}


def _merged(name: str, options: dict | None) -> dict:
    spec = dict(_spec(name))
    spec["size_mb"] = SIZES_MB[name]
    options = dict(options or {})
    check_options(name, options, OPTION_KEYS)
    for key, value in options.items():
        if value is not None:
            spec[key] = list(value) if key == "urls" else value
    return spec


class CifarDataset(Dataset):
    """One CIFAR set as a :class:`calbench.data.base.Dataset`.

    ``load_split(root, "test")`` (or ``"train"``) returns uint8 ``(N, 3, 32, 32)`` and int64
    ``(N,)`` tensors in torchvision order; ``preprocessor(spec)`` applies the spec's named
    ``preprocessing`` preset. ``options`` (a dataset config entry: ``archive``, ``urls``,
    ``md5``, ``test_md5``, ``train_md5s``, ``size_mb``) replace the pinned values, for mirrors
    of other names and for test-made files; :meth:`configure` returns such a variant.
    """

    INPUT_SHAPE = (3, 32, 32)
    OPTION_KEYS = OPTION_KEYS

    def __init__(self, name: str, options: dict | None = None):
        self.spec = _merged(name, options)
        self.options = dict(options or {})
        self.NAME = name
        self.NUM_CLASSES = self.spec["num_classes"]
        self.URLS = tuple(self.spec["urls"])
        self.SIZE_MB = self.spec["size_mb"]
        self.FILES = ((self.spec["archive"], self.spec["size_mb"]),)

    def prepare(self, root, *, mirrors=(), urls=None, timeout: float = 60.0) -> dict:
        spec = self.spec
        folder = _fetch_and_extract(
            spec,
            root,
            urls=spec["urls"] if urls is None else urls,
            mirrors=mirrors,
            timeout=timeout,
        )
        labels = read_cifar_test(self.NAME, root, md5=spec["test_md5"])[1]
        return {
            "dataset": self.NAME,
            "archive": spec["archive"],
            "md5": spec["md5"],
            "test_md5": spec["test_md5"],
            "folder": str(folder),
            "splits": {"test": {"n": int(labels.shape[0])}},
        }

    def load_split(self, root, split: str = "test"):
        import torch

        name, spec = self.NAME, self.spec
        if split == "test":
            images, labels = read_cifar_test(name, root, md5=spec["test_md5"])
        elif split == "train":  # models trained by the workflow (paper-scale objective studies)
            images, labels = read_cifar_train(name, root, md5s=spec.get("train_md5s", "pinned"))
        else:
            raise ValueError(f"{name}: split must be 'test' or 'train', got {split!r}")
        return torch.from_numpy(images.transpose(0, 3, 1, 2).copy()), torch.from_numpy(labels)

    def preprocessor(self, spec: dict | None = None):
        preset = (spec or {}).get("preprocessing")
        if not preset:
            raise ValueError(
                f"{self.NAME}: the model entry needs a 'preprocessing' preset (e.g. cifar10_huy)"
            )
        return uint8_preprocessor(preset)

    def configure(self, options: dict | None) -> CifarDataset:
        return CifarDataset(self.NAME, {**self.options, **(options or {})})


CIFAR10 = CifarDataset("cifar10")
CIFAR100 = CifarDataset("cifar100")
