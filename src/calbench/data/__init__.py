"""Datasets: download with pinned checksums, load as whole uint8 tensors, preprocess on the fly.

Each dataset is one module registered in :data:`DATASETS` (name -> module path, imported on
first use so the CLI starts fast). Adding a dataset is one entry here plus a module providing:

``NAME``, ``NUM_CLASSES``, ``INPUT_SHAPE`` (C, H, W), ``DEFAULT_MIRRORS`` (directories),
``prepare(root, *, mirrors, urls) -> dict`` (place and verify the files, return the manifest),
``load_split(root, split) -> (images uint8 tensor (N, C, H, W), labels int64 tensor (N,))`` in the
dataset's own sample order, and ``preprocessor(spec) -> callable`` mapping a uint8 batch (on any
device) to the float32 network input for the model described by ``spec`` (a config entry).

Optional: ``configure(options) -> interface`` (the dataset's config entry overrides pinned
values, e.g. ``datasets.imagenet.path`` or a test-made archive's MD5), ``FILES`` ((name, MiB),
...) for ``calbench stage --dry-run``, and ``STREAMING = True`` with ``stream_split(root, split,
spec)`` -> a map-style dataset (``ids``, ``labels``, items ``(tensor, label)`` transformed by the
model's preset) for datasets too large for one uint8 tensor (ImageNet). A registered value
``"module:attribute"`` names an interface object inside a module (the two CIFAR sets).
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: dataset name (config slug) -> module implementing it
DATASETS: dict[str, str] = {
    "fashion_mnist": "calbench.data.fashion_mnist",
    "cifar10": "calbench.data.cifar:CIFAR10",
    "cifar100": "calbench.data.cifar:CIFAR100",
    "tiny_imagenet": "calbench.data.tiny_imagenet",
    "imagenet": "calbench.data.imagenet",
}


def get_dataset(name: str, options: dict | None = None) -> ModuleType:
    """Return the interface implementing dataset ``name`` (see :data:`DATASETS`), configured with
    ``options`` (its config entry's overrides) when given."""
    if name not in DATASETS:
        raise ValueError(
            f"unknown dataset {name!r}; choose one of {sorted(DATASETS)} "
            "(or register a module in calbench.data.DATASETS)"
        )
    module, _, attr = DATASETS[name].partition(":")
    obj = importlib.import_module(module)
    if attr:
        obj = getattr(obj, attr)
    if options:
        if not hasattr(obj, "configure"):
            raise ValueError(
                f"dataset {name} takes no options, got {sorted(options)}; remove them from its entry"
            )
        obj = obj.configure(options)
    return obj


def ids_order_hash(ids, labels) -> str:
    """SHA-256 identifying an ordered sequence by sample identities (e.g. relative file paths)
    and labels, for streamed datasets whose images are never held at once."""
    import hashlib

    import numpy as np

    h = hashlib.sha256()
    for i in ids:
        h.update(str(i).encode() + b"\n")
    h.update(np.asarray(labels, dtype=np.int64).tobytes())
    return h.hexdigest()


def order_hash(images, labels) -> str:
    """SHA-256 identifying an ordered sample sequence: :func:`calbench.io.array_digest` of the
    uint8 images and int64 labels in order (numpy arrays or CPU tensors)."""
    import numpy as np

    from calbench.io import array_digest

    def _np(a):
        return a.numpy() if hasattr(a, "numpy") else np.asarray(a)

    return array_digest(_np(images).astype(np.uint8, copy=False), _np(labels).astype(np.int64))


__all__ = ["DATASETS", "get_dataset", "ids_order_hash", "order_hash"]
