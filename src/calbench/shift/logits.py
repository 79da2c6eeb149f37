"""A model's logits on the test half of every corrupted test set (the dataset-shift stage).

Protocol of Ovadia et al. (2019, §3-4): the model and its calibrators see clean data only; the
shift is applied to the evaluation images. Here the evaluation images are the study's test half
(:mod:`calbench.split`: the same indices as the clean evaluation), taken from each corrupted
copy of the test set at severities 1-5 (:mod:`calbench.shift.datasets`), so clean and shifted
numbers are computed on the same samples.

File format (``.npz``, written atomically): ``logits`` float32 ``(C, 5, n_test, K)`` (corruption,
severity 1-5, sample, class), ``labels`` int64 ``(n_test,)``, ``test_idx`` int64 (the indices
into the test set), ``corruptions`` (C,) strings, ``sha256`` (C,) strings (the corrupted files
used, from their manifests), ``order_hash``, ``model``, ``dataset``.
"""

from __future__ import annotations

import os

import numpy as np

from calbench._checks import check_labels, check_logits
from calbench.io import atomic_path, read_npz
from calbench.logits import compute_logits, load_logits
from calbench.shift.corruptions import SEVERITIES

KEYS = ("logits", "labels", "test_idx", "corruptions", "sha256", "order_hash", "model", "dataset")


def shift_logits(
    spec: dict,
    *,
    corrupted: list,
    clean_logits,
    split,
    out,
    checkpoint=None,
    name: str | None = None,
    batch_size: int = 500,
    device: str = "auto",
    dataset_options: dict | None = None,
) -> dict:
    """Run the model ``spec`` describes on the test half of each corrupted set in ``corrupted``
    (``<corruption>.npy`` paths) and write ``out``. ``clean_logits`` and ``split`` are the clean
    study's files: their order hash must match every corrupted set's, and the split's test
    indices select the images. Returns a summary (accuracy per corruption and severity)."""
    import torch

    from calbench.data import get_dataset  # lazy: code inputs
    from calbench.models import load_model, resolve_device  # lazy: code inputs
    from calbench.shift.datasets import load_corrupted  # lazy: code inputs

    if not corrupted:
        raise ValueError("no corrupted sets given; pass at least one <corruption>.npy")
    clean = load_logits(clean_logits)
    n = clean["labels"].shape[0]
    _, test_idx = read_split(split, n, clean["order_hash"], labels=clean["labels"])
    labels = clean["labels"][test_idx]
    dataset = get_dataset(spec["dataset"], dataset_options)
    preprocess = dataset.preprocessor(spec)
    sets = []
    for path in corrupted:
        images, manifest = load_corrupted(path)
        if manifest["order_hash"] != clean["order_hash"] or images.shape[1] != n:
            raise ValueError(
                f"{path} was made from other test images than {clean_logits} (order hash or "
                f"size {images.shape[1]} vs {n} differ); rebuild the corrupted set from the same "
                "dataset entry (limit) as the logits"
            )
        sets.append((manifest, images))
    names = [m["corruption"] for m, _ in sets]
    if len(set(names)) != len(names):
        raise ValueError(f"corruptions given twice: {names}; pass each corrupted set once")
    device = resolve_device(device)
    model = load_model(spec, checkpoint=checkpoint, device=device)
    out_logits = []
    for _, images in sets:
        per_sev = []
        for s in range(len(SEVERITIES)):
            x = np.ascontiguousarray(images[s][test_idx]).transpose(0, 3, 1, 2)
            z = compute_logits(
                model,
                torch.from_numpy(np.ascontiguousarray(x)),
                preprocess,
                batch_size=batch_size,
                device=device,
                progress=False,
            )
            per_sev.append(z)
        out_logits.append(np.stack(per_sev))
    logits = np.stack(out_logits).astype(np.float32)
    model_name = name or clean["model"]
    save_shift_logits(
        out,
        logits=logits,
        labels=labels,
        test_idx=test_idx,
        corruptions=names,
        sha256=[m["sha256"] for m, _ in sets],
        order_hash=clean["order_hash"],
        model=model_name,
        dataset=clean["dataset"],
    )
    acc = (logits.argmax(-1) == labels).mean(-1)
    return {"corruptions": names, "accuracy": acc, "n_test": int(labels.shape[0])}


def read_split(path, n: int, order_hash: str, labels=None) -> tuple[np.ndarray, np.ndarray]:
    """``(val_idx, test_idx)`` of a split file (:func:`calbench.split.save_split`), checked to
    partition ``range(n)`` and to belong to samples of ``order_hash`` (with ``labels``: also
    when the split was made from an imported file, whose order is known by labels only)
    (:func:`calbench.split.load_split`, the one reader of split files)."""
    from calbench.split import load_split  # lazy: code inputs

    return load_split(path, n, order_hash, labels=labels)


def save_shift_logits(path, **fields) -> None:
    """Validate and write a shift-logits file atomically (format: module docstring)."""
    z = np.asarray(fields["logits"], dtype=np.float32)
    c = len(fields["corruptions"])
    if z.ndim != 4 or z.shape[0] != c or z.shape[1] != len(SEVERITIES):
        raise ValueError(f"shift logits must be (corruptions={c}, 5, n, K), got {z.shape}")
    check_logits(z.reshape(-1, z.shape[-1]), name="shift logits")
    y = check_labels(fields["labels"], z.shape[2], z.shape[3])
    with atomic_path(path) as tmp:
        np.savez(
            tmp,
            logits=z,
            labels=np.asarray(y, dtype=np.int64),
            test_idx=np.asarray(fields["test_idx"], dtype=np.int64),
            corruptions=np.array(fields["corruptions"], dtype=np.str_),
            sha256=np.array(fields["sha256"], dtype=np.str_),
            order_hash=np.str_(fields["order_hash"]),
            model=np.str_(fields["model"]),
            dataset=np.str_(fields["dataset"]),
        )


def load_shift_logits(path) -> dict:
    """Read and check a shift-logits file (see the module docstring)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"shift logits {path} do not exist; run calbench shift-logits")
    data = read_npz(path, "shift logits", "run shift-logits again")
    missing = [k for k in KEYS if k not in data]
    if missing:
        raise ValueError(f"{path} lacks {missing}; write it with calbench shift-logits")
    out = {k: data[k] for k in ("logits", "labels", "test_idx")}
    out["corruptions"] = [str(c) for c in data["corruptions"]]
    out["sha256"] = [str(c) for c in data["sha256"]]
    for k in ("order_hash", "model", "dataset"):
        out[k] = str(data[k])
    if out["logits"].ndim != 4 or out["logits"].shape[:2] != (len(out["corruptions"]), 5):
        raise ValueError(
            f"{path}: logits of shape {out['logits'].shape} do not match its corruptions"
        )
    return out
