"""Batched inference that caches a model's test-set logits with the labels and sample order.

Follows the study's logit extraction (Vasilev, MSU 2021, §5.1; replication notes §2.1): the model
in eval mode, gradients off, float32 (no mixed precision), samples in the dataset's own order;
the raw final-layer outputs ``(N, K)`` are stored with the labels. The file also records
``order_hash`` (:func:`calbench.data.order_hash` of the images and labels in order), so every
later step can check that all models of a dataset saw the same samples in the same order, which
the study's split (:mod:`calbench.split`) depends on.

File format (``.npz``, written atomically): ``logits`` float32 (N, K), ``labels`` int64 (N,),
``order_hash``, ``model``, ``dataset`` (strings). Wider logits are stored as
:func:`float32_logits` makes them: as they are when float32 holds them exactly, else shifted by
each row's maximum first (the same probabilities).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from calbench._checks import check_input_file, check_labels, check_logits, check_text
from calbench.io import atomic_path, read_npz


def _check_batch_size(batch_size) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")


def run_batches(model, batches, *, device: str = "cpu", total: int, progress: bool = False):
    """``model``'s float32 outputs (N, K) over ``batches`` (an iterable of input tensors), in
    order, as a numpy array: the model in eval mode on ``device``, under
    ``torch.inference_mode()`` (the batches are produced inside it), each output checked to be
    ``(batch, classes)`` and moved to the CPU. ``total``: the number of samples (the progress
    bar's length). The one inference loop of :func:`compute_logits`,
    :func:`compute_logits_stream` and the training's validation.
    """
    import torch

    model.to(device).eval()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total, desc="logits", unit="img", disable=None)
    outs = []
    with torch.inference_mode():
        for xb in batches:
            out = model(xb.to(device))
            if out.ndim != 2:
                raise ValueError(
                    f"the model returned outputs of shape {tuple(out.shape)}, expected (batch, "
                    "classes); the model must end in its classifier layer"
                )
            outs.append(out.to(device="cpu", dtype=torch.float32))
            if bar is not None:
                bar.update(xb.shape[0])
    if bar is not None:
        bar.close()
    return torch.cat(outs).numpy()


def compute_logits(
    model,
    images,
    preprocess,
    *,
    batch_size: int = 500,
    device: str = "cpu",
    progress: bool = True,
) -> np.ndarray:
    """Return ``model``'s float32 outputs (N, K) for uint8 ``images`` (N, ...) in order.

    Batches of ``batch_size`` go through ``preprocess`` (uint8 -> float input) on ``device``
    under ``torch.inference_mode()`` with the model in eval mode (:func:`run_batches`).
    """
    _check_batch_size(batch_size)
    n = int(images.shape[0])
    if n == 0:
        raise ValueError("no images to run; pass at least one sample")
    batches = (
        preprocess(images[start : start + batch_size].to(device))
        for start in range(0, n, batch_size)
    )
    return run_batches(model, batches, device=device, total=n, progress=progress)


def compute_logits_stream(
    model,
    dataset,
    *,
    batch_size: int = 500,
    device: str = "cpu",
    workers: int = 0,
    progress: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Return float32 outputs (N, K) and int64 labels (N,) of ``model`` over a map-style
    ``dataset`` whose items are ``(preprocessed tensor, label)``, in the dataset's order.

    The streaming counterpart of :func:`compute_logits` for datasets too large to hold as one
    uint8 tensor (ImageNet's 50,000 validation images): a ``DataLoader`` without shuffling
    (``workers`` decode in parallel; order is kept), same eval-mode / inference-mode / float32
    rules (:func:`run_batches`).
    """
    import torch
    from torch.utils.data import DataLoader

    _check_batch_size(batch_size)
    if len(dataset) == 0:
        raise ValueError("no images to run; pass at least one sample")
    loader = DataLoader(
        dataset, batch_size=batch_size, shuffle=False, num_workers=workers, drop_last=False
    )
    ys = []

    def inputs():
        for xb, yb in loader:
            ys.append(torch.as_tensor(yb, dtype=torch.int64))
            yield xb

    logits = run_batches(model, inputs(), device=device, total=len(dataset), progress=progress)
    return logits, torch.cat(ys).numpy()


class _Head:
    """The first ``n`` items of a map-style dataset (``limit``), keeping ``ids``/``labels``."""

    def __init__(self, dataset, n: int):
        self.dataset, self.n = dataset, min(n, len(dataset))
        self.ids = list(dataset.ids)[: self.n]
        self.labels = list(dataset.labels)[: self.n]

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i >= self.n:
            raise IndexError(i)
        return self.dataset[i]


#: what a logits file records besides its arrays, each a plain name (:func:`check_text`)
NAME_FIELDS = ("order_hash", "model", "dataset")

#: the largest finite float32
_FLOAT32_MAX = float(np.finfo(np.float32).max)


#: a direct float32 cast is kept while its error in the within-row differences stays within
#: this many float32 spacings of the largest difference
_DIRECT_CAST_ULPS = 4


def float32_logits(logits, name: str = "logits") -> np.ndarray:
    """``logits`` (N, K) as finite float32 that keep what the probabilities depend on.

    float32 logits are returned as they are and float16 ones widened (exactly). Wider logits
    (float64, integers) are cast as they are when the cast keeps every difference within a row
    to float32's precision (float32 logits saved as float64 come back bit for bit; float64
    log-probabilities stay log-probabilities); otherwise each row's maximum is subtracted in
    float64 first. Softmax is invariant to a shift of a row, ``softmax(z) = softmax(z -
    max(z))``, so nothing a probability depends on changes, while the rounding to float32 falls
    on the differences from the row's maximum rather than on an offset that can dwarf them
    (with a row offset of 1e7 float32's spacing is 1, so a direct cast ties classes that differ
    by less). Logits differing within a row by more than float32 holds are a one-line error.
    Non-finite logits: :func:`calbench._checks.check_logits`.
    """
    arr = check_logits(logits, name)
    if arr.dtype == np.float32:
        return arr
    with np.errstate(over="ignore", invalid="ignore"):
        out = arr.astype(np.float32)
    if np.array_equal(out, arr):
        return out
    shifted = arr - arr.max(axis=1, keepdims=True)
    span = -float(shifted.min())
    if span > _FLOAT32_MAX:
        raise ValueError(
            f"{name} differ within a row by {span:.3g}, more than float32 holds "
            f"({_FLOAT32_MAX:.3g}); put the values that far below their row's maximum at "
            "that maximum - 1e4 instead (the same softmax)"
        )
    if np.isfinite(out).all():
        # the direct cast is kept when the differences within each row (all a probability
        # depends on) come out as exactly as float32 can hold them: the file's own logits (e.g.
        # log-probabilities) stay the logits, which maps that are not shift-invariant (vector
        # and matrix scaling) are fitted on
        direct = out.astype(np.float64)
        err = float(np.abs((direct - direct.max(axis=1, keepdims=True)) - shifted).max())
        if err <= _DIRECT_CAST_ULPS * np.finfo(np.float32).eps * max(1.0, span):
            return out
    return shifted.astype(np.float32)


def save_logits(path, logits, labels, *, order_hash: str, model: str, dataset: str) -> None:
    """Validate and write a logits file atomically (see the module docstring for the format;
    logits other than float32 as :func:`float32_logits` makes them)."""
    z = float32_logits(logits)
    y = check_labels(labels, z.shape[0], z.shape[1])
    for name, value in (("order_hash", order_hash), ("model", model), ("dataset", dataset)):
        check_text(value, f"{name}", "pass a plain name (letters, digits, '_', '-', '.')")
    with atomic_path(path) as tmp:
        np.savez(
            tmp,
            logits=z,
            labels=y.astype(np.int64),
            order_hash=np.str_(order_hash),
            model=np.str_(model),
            dataset=np.str_(dataset),
        )


def load_logits(path: str | os.PathLike) -> dict:
    """Read and validate a logits file; returns ``logits``, ``labels``, ``order_hash``, ``model``,
    ``dataset``.

    The names it records are plain strings (:func:`calbench._checks.check_text`: no arrays,
    bytes, control characters or spreadsheet formulas reach the CSVs). A file laid out as the
    workflow lays them out, ``.../<dataset>/<model>.npz`` with ``<dataset>`` the dataset it
    records, must record that model: another model's logits copied over it are refused here,
    where they are first read, naming the file."""
    check_input_file(path, "logits file", "run calbench cache-logits first")
    data = read_npz(path, "logits file", "delete it and cache the logits again")
    missing = [k for k in ("logits", "labels", *NAME_FIELDS) if k not in data]
    if missing:
        raise ValueError(f"logits file {path} lacks {missing}; write it with calbench cache-logits")
    logits = check_logits(data["logits"], name=f"logits in {path}")
    labels = check_labels(
        data["labels"], logits.shape[0], logits.shape[1], name=f"labels in {path}"
    )
    names = {
        k: check_text(data[k], f"logits file {path}: {k}", "write it again with calbench cache-logits")
        for k in NAME_FIELDS
    }
    p = Path(path)
    if p.parent.name == names["dataset"] and p.stem != names["model"]:
        raise ValueError(
            f"logits file {path} records model {names['model']!r}, not {p.stem!r}: another "
            f"model's logits copied over it? cache {p.stem}'s logits again (calbench "
            "cache-logits or import-logits)"
        )
    return {"logits": logits, "labels": labels, **names}


def cache_logits(
    spec: dict,
    *,
    data_root,
    out,
    checkpoint=None,
    name: str | None = None,
    batch_size: int = 500,
    device: str = "auto",
    limit: int | None = None,
    split: str = "test",
    progress: bool = True,
    dataset_options: dict | None = None,
    workers: int = 0,
) -> dict:
    """Run the model ``spec`` describes on its dataset's ``split`` and write ``out``.

    ``limit`` keeps the first ``limit`` samples. ``dataset_options`` is the dataset's config
    entry (overrides of its pinned files, see :func:`calbench.data.get_dataset`). Datasets held
    in memory (CIFAR, Tiny ImageNet, Fashion-MNIST) go through the dataset's uint8
    ``preprocessor(spec)``; streamed ones (``STREAMING``, ImageNet) through ``stream_split``
    with the spec's preset transform and a DataLoader of ``workers`` processes. Returns a summary
    dict (n, classes, accuracy, order_hash).
    """
    from calbench._device import resolve_device  # lazy: code inputs
    from calbench.data import get_dataset, ids_order_hash, order_hash  # lazy: code inputs
    from calbench.models import load_model  # lazy: code inputs

    if not isinstance(spec, dict) or not isinstance(spec.get("dataset"), str):
        raise ValueError(
            "model spec has no 'dataset' entry; add dataset: <name> to the model config"
        )
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be an integer >= 1, got {limit!r}")
    dataset = get_dataset(spec["dataset"], dataset_options)
    device = resolve_device(device)
    if getattr(dataset, "STREAMING", False):
        data = dataset.stream_split(data_root, split, spec)  # checks the data before the model
        if limit is not None:
            data = _Head(data, limit)
        model = load_model(spec, checkpoint=checkpoint, device=device)
        logits, y = compute_logits_stream(
            model, data, batch_size=batch_size, device=device, workers=workers, progress=progress
        )
        ohash = ids_order_hash(data.ids, y)
    else:
        images, labels = dataset.load_split(data_root, split)
        if limit is not None:
            images, labels = images[:limit], labels[:limit]
        preprocess = dataset.preprocessor(spec)
        model = load_model(spec, checkpoint=checkpoint, device=device)
        logits = compute_logits(
            model, images, preprocess, batch_size=batch_size, device=device, progress=progress
        )
        ohash = order_hash(images, labels)
        y = labels.numpy().astype(np.int64)
    model_name = name or spec.get("name") or os.path.splitext(os.path.basename(str(out)))[0]
    save_logits(out, logits, y, order_hash=ohash, model=model_name, dataset=spec["dataset"])
    return {
        "n": int(y.shape[0]),
        "classes": int(logits.shape[1]),
        "accuracy": float(np.mean(logits.argmax(1) == y)),
        "order_hash": ohash,
    }
