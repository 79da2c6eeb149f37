"""Datasets: download with pinned checksums, load as whole uint8 tensors, preprocess on the fly.

Each dataset is an instance of a :class:`calbench.data.base.Dataset` subclass (which states the
interface: ``NAME``, ``NUM_CLASSES``, ``prepare``, ``load_split``, ``preprocessor``, ...),
registered in :data:`DATASETS` as ``"module:ATTRIBUTE"`` and imported on first use so the CLI
starts fast. Adding a dataset is one such subclass and one entry here.
"""

from __future__ import annotations

import importlib

from calbench.data.base import Dataset
from calbench.io import array_digest, hasher

#: dataset name (config slug) -> ``"module:attribute"`` of its :class:`Dataset` instance
DATASETS: dict[str, str] = {
    "fashion_mnist": "calbench.data.fashion_mnist:FASHION_MNIST",
    "cifar10": "calbench.data.cifar:CIFAR10",
    "cifar100": "calbench.data.cifar:CIFAR100",
    "tiny_imagenet": "calbench.data.tiny_imagenet:TINY_IMAGENET",
    "imagenet": "calbench.data.imagenet:IMAGENET",
}


def get_dataset(name: str, options: dict | None = None) -> Dataset:
    """Return the :class:`Dataset` registered as ``name`` (see :data:`DATASETS`), configured
    with ``options`` (its config entry's overrides) when given."""
    if name not in DATASETS:
        raise ValueError(
            f"unknown dataset {name!r}; choose one of {sorted(DATASETS)} "
            "(or register a module in calbench.data.DATASETS)"
        )
    module, _, attr = DATASETS[name].partition(":")
    dataset = getattr(importlib.import_module(module), attr)
    return dataset.configure(options) if options else dataset


def ids_order_hash(ids, labels) -> str:
    """SHA-256 identifying an ordered sequence by sample identities (e.g. relative file paths)
    and labels, for streamed datasets whose images are never held at once."""
    import numpy as np

    h = hasher()
    for i in ids:
        h.update(str(i).encode() + b"\n")
    h.update(np.asarray(labels, dtype=np.int64).tobytes())
    return h.hexdigest()


def order_hash(images, labels) -> str:
    """SHA-256 identifying an ordered sample sequence: :func:`calbench.io.array_digest` of the
    uint8 images and int64 labels in order (numpy arrays or CPU tensors)."""
    import numpy as np

    def _np(a):
        return a.numpy() if hasattr(a, "numpy") else np.asarray(a)

    return array_digest(_np(images).astype(np.uint8, copy=False), _np(labels).astype(np.int64))


__all__ = ["DATASETS", "Dataset", "get_dataset", "ids_order_hash", "order_hash"]
