"""Datasets: download with pinned checksums, load as whole uint8 tensors, preprocess on the fly.

Each dataset is one module registered in :data:`DATASETS` (name -> module path, imported on
first use so the CLI starts fast). Adding a dataset is one entry here plus a module providing:

``NAME``, ``NUM_CLASSES``, ``INPUT_SHAPE`` (C, H, W), ``DEFAULT_MIRRORS`` (directories),
``prepare(root, *, mirrors, urls) -> dict`` (place and verify the files, return the manifest),
``load_split(root, split) -> (images uint8 tensor (N, C, H, W), labels int64 tensor (N,))`` in the
dataset's own sample order, and ``preprocessor(spec) -> callable`` mapping a uint8 batch (on any
device) to the float32 network input for the model described by ``spec`` (a config entry).
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: dataset name (config slug) -> module implementing it
DATASETS: dict[str, str] = {
    "fashion_mnist": "calbench.data.fashion_mnist",
}


def get_dataset(name: str) -> ModuleType:
    """Return the module implementing dataset ``name`` (see :data:`DATASETS`)."""
    if name not in DATASETS:
        raise ValueError(
            f"unknown dataset {name!r}; choose one of {sorted(DATASETS)} "
            "(or register a module in calbench.data.DATASETS)"
        )
    return importlib.import_module(DATASETS[name])


def order_hash(images, labels) -> str:
    """SHA-256 identifying an ordered sample sequence: :func:`calbench.io.array_digest` of the
    uint8 images and int64 labels in order (numpy arrays or CPU tensors)."""
    import numpy as np

    from calbench.io import array_digest

    def _np(a):
        return a.numpy() if hasattr(a, "numpy") else np.asarray(a)

    return array_digest(_np(images).astype(np.uint8, copy=False), _np(labels).astype(np.int64))


__all__ = ["DATASETS", "get_dataset", "order_hash"]
