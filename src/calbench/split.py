"""The study's validation/test split of a test set's logits.

Vasilev (MSU 2021), "Calibration of Neural Networks", §5.1: every dataset's test logits are cut in
two halves with scikit-learn ``train_test_split(logits, targets, test_size=0.5, random_state=0)``
(no stratification); the first output is the calibration (validation) half, the second the test
half. That call is a ShuffleSplit: ``perm = np.random.RandomState(0).permutation(N)``, the test
half is ``perm[:ceil(N / 2)]`` and the validation half ``perm[ceil(N / 2):]``, each in permutation
order. :func:`study_split` reproduces it with numpy alone (no scikit-learn import), so every model
of a dataset gets the same indices.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from calbench._checks import check_input_file
from calbench.io import atomic_path, bytes_digest, file_digest, read_npz

#: the two halves of a model's test-set logits: calibrators are fitted on val, reported on test
HALVES = ("test", "val")

#: prefix of the ``order_hash`` of logits imported from a file (calbench.logits_sources): such a
#: file holds no sample identities, so its sample order is known by its labels only. Beside
#: logits whose order hash names the dataset's samples (calbench.data.order_hash), it is
#: checked label by label (:func:`first_label_mismatch`): equal labels in order join the
#: dataset, any other is refused naming the first index that differs.
LABELS_ONLY = "labels:"


def by_labels_only(hash_a: str, hash_b: str) -> bool:
    """True when two different order hashes can be compared only through labels: one of them
    (or both) is an imported file's (:data:`LABELS_ONLY`)."""
    return hash_a.startswith(LABELS_ONLY) or hash_b.startswith(LABELS_ONLY)


def first_label_mismatch(labels, reference) -> int | None:
    """The first index where ``labels`` differ from ``reference`` (same length), or ``None``."""
    diff = np.flatnonzero(np.asarray(labels, np.int64) != np.asarray(reference, np.int64))
    return int(diff[0]) if diff.size else None


def label_mismatch_error(which: str, reference: str, labels, ref_labels) -> ValueError | None:
    """The one-line refusal of logits ``which`` whose labels differ from those of ``reference``
    (same length): index and both labels of the first difference and how many differ; ``None``
    when they are equal."""
    i = first_label_mismatch(labels, ref_labels)
    if i is None:
        return None
    count = int(np.count_nonzero(np.asarray(labels) != np.asarray(ref_labels)))
    return ValueError(
        f"{which} differs in labels from {reference}, first at index {i} (label {int(labels[i])} "
        f"vs {int(ref_labels[i])}; {count} of {len(labels)} differ): an imported file joins a "
        "dataset only with the dataset's labels in the dataset's sample order; save its rows in "
        "that order, or give the model a dataset of its own"
    )


def study_split(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(val_idx, test_idx)`` (int64) for ``n`` samples, as the study split them.

    Equal to scikit-learn's ``train_test_split(np.arange(n), test_size=0.5, random_state=seed)``
    (returned as ``(train, test)`` there): the test half gets ``ceil(n / 2)`` samples.
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
        raise ValueError(f"n must be an integer >= 2 to split into two halves, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    n = int(n)
    n_test = math.ceil(0.5 * n)
    perm = np.random.RandomState(int(seed)).permutation(n).astype(np.int64)
    return perm[n_test:].copy(), perm[:n_test].copy()


def index_sha256(idx: np.ndarray) -> str:
    """SHA-256 of indices as int64 little-endian bytes, in the order given."""
    return bytes_digest(np.asarray(idx).astype("<i8").tobytes())


def split_digests(val_idx: np.ndarray, test_idx: np.ndarray) -> dict[str, str]:
    """``val_sorted_sha256`` (sorted validation indices) and ``test_order_sha256`` (split order)."""
    return {
        "val_sorted_sha256": index_sha256(np.sort(np.asarray(val_idx))),
        "test_order_sha256": index_sha256(test_idx),
    }


def check_logits_files_agree(metas: list[dict]) -> int:
    """Return the common sample count of logits files' ``(name, n, labels, order_hash)`` records.

    Each record is a dict with ``path``, ``n``, ``labels`` and ``order_hash``; all must agree, since
    one split serves every model of a dataset.
    """
    if not metas:
        raise ValueError("no logits files given; pass at least one --logits FILE")
    ref = metas[0]
    for m in metas[1:]:
        if m["n"] != ref["n"]:
            raise ValueError(
                f"{m['path']} holds {m['n']} samples but {ref['path']} holds {ref['n']}; "
                "cache every model's logits on the same dataset and --limit"
            )
        differ = m["order_hash"] != ref["order_hash"]
        if differ and by_labels_only(m["order_hash"], ref["order_hash"]):
            exc = label_mismatch_error(m["path"], ref["path"], m["labels"], ref["labels"])
            if exc is not None:
                raise exc
        elif differ:
            raise ValueError(
                f"{m['path']} and {ref['path']} differ in sample order (order_hash); "
                "cache their logits from the same dataset files in the dataset's order"
            )
        if not np.array_equal(m["labels"], ref["labels"]):
            raise ValueError(
                f"{m['path']} and {ref['path']} have different labels; "
                "cache their logits from the same dataset"
            )
    return int(ref["n"])


def save_split(
    path, val_idx: np.ndarray, test_idx: np.ndarray, *, labels=None, **extra
) -> dict[str, str]:
    """Write the split ``.npz`` (``val_idx``, ``test_idx``, both digests, extras) atomically,
    after checking the halves partition the samples (:func:`check_partition`). With ``labels``
    (of the logits it splits), also ``labels_sha256``, which :func:`load_split` compares with
    the labels of the logits it is later given."""
    n = len(np.asarray(val_idx)) + len(np.asarray(test_idx))
    val_idx, test_idx = check_partition(val_idx, test_idx, n, path)
    digests = split_digests(val_idx, test_idx)
    if labels is not None:
        extra["labels_sha256"] = np.str_(labels_sha256(labels))
        extra["labels"] = np.asarray(labels).astype(np.int64)  # the order check of imported files
    with atomic_path(path) as tmp:
        np.savez(tmp, val_idx=val_idx, test_idx=test_idx, **digests, **extra)
    return digests


def check_partition(
    val_idx, test_idx, n: int, where, fix: str = "rebuild it with calbench split"
) -> tuple[np.ndarray, np.ndarray]:
    """``(val_idx, test_idx)`` as int64 if together they partition ``range(n)``: 1-D integer
    arrays, each non-empty, no index negative or ``>= n``, none repeated within a half, none in
    both halves (a calibrator fitted on samples it is then evaluated on), every sample in one.
    Else a one-line ``ValueError`` naming ``where`` (the split file), what is wrong and ``fix``. The one
    check of every split read (:func:`load_split`, the pre-split logits sources)."""
    parts = []
    for name, idx in (("val_idx", val_idx), ("test_idx", test_idx)):
        idx = np.asarray(idx)
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer) or idx.size == 0:
            raise ValueError(
                f"split {where}: {name} must be a non-empty 1-D integer array, got dtype "
                f"{idx.dtype} shape {idx.shape}; {fix}"
            )
        if idx.dtype == np.uint64 and int(idx.max()) > np.iinfo(np.int64).max:
            raise ValueError(f"split {where}: {name} holds indices beyond {n - 1}; {fix}")
        idx = idx.astype(np.int64)
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= n:
            raise ValueError(
                f"split {where}: {name} holds indices in [{lo}, {hi}] but the logits have {n} "
                f"rows (valid 0..{n - 1}); {fix}"
            )
        parts.append(idx)
    val, test = parts
    for name, idx in (("val_idx", val), ("test_idx", test)):
        if np.unique(idx).size != idx.size:
            raise ValueError(
                f"split {where}: {name} repeats {idx.size - np.unique(idx).size} indices; each "
                f"sample belongs in one half once; {fix}"
            )
    shared = np.intersect1d(val, test).size
    if shared:
        raise ValueError(
            f"split {where}: {shared} indices are in both val_idx and test_idx, so calibrators "
            f"would be evaluated on samples they were fitted on; {fix}"
        )
    if val.size + test.size != n:
        raise ValueError(
            f"split {where} covers {val.size} + {test.size} indices but the logits have {n} "
            f"rows; {fix}"
        )
    return val, test


def labels_sha256(labels: np.ndarray) -> str:
    """SHA-256 of labels as int64 little-endian bytes: what a split records of the logits it
    was made from, so logits with other labels (another dataset's file copied over) are refused
    by name when they are read with it."""
    return index_sha256(labels)


def load_split(
    path, n: int, order_hash: str = "", *, labels=None, logits_path=None
) -> tuple[np.ndarray, np.ndarray]:
    """Read a split ``.npz`` and check it partitions ``range(n)`` (:func:`check_partition`);
    returns ``(val_idx, test_idx)``. With ``labels`` (of the logits file ``logits_path``), a
    split that records other labels (``labels_sha256``) or another sample order is refused
    naming that logits file."""
    path = Path(path)
    check_input_file(path, "split file", "run calbench split first")
    data = read_npz(path, "split file", "rebuild it with calbench split")
    if "val_idx" not in data or "test_idx" not in data:
        raise ValueError(f"{path} lacks val_idx/test_idx; regenerate it with calbench split")
    val, test = check_partition(
        data["val_idx"],
        data["test_idx"],
        n,
        path,
        "rebuild the split from these logits (calbench split)",
    )
    split_hash = str(data["order_hash"]) if "order_hash" in data else ""
    which = f"logits file {logits_path}" if logits_path is not None else "the logits"
    differ = bool(order_hash and split_hash and order_hash != split_hash)
    if differ and by_labels_only(order_hash, split_hash):
        if labels is None or "labels" not in data:
            raise ValueError(
                f"{which} comes from an imported file or split {path} does, so their sample "
                "order can be checked by labels only, and the split records none: rebuild the "
                "split (calbench split)"
            )
        if np.shape(data["labels"]) != (n,):
            raise ValueError(
                f"split {path} records {np.size(data['labels'])} labels but the logits have {n} "
                "rows; rebuild the split (calbench split)"
            )
        exc = label_mismatch_error(which, f"split {path}", labels, data["labels"])
        if exc is not None:
            raise exc
    elif differ:
        raise ValueError(
            f"{which} holds samples in another order than split {path} was made for "
            f"(order_hash {order_hash[:12]}... vs {split_hash[:12]}...): another dataset's "
            "logits copied over? cache these logits again, or rebuild the split from them"
        )
    if labels is not None and "labels_sha256" in data:
        if labels_sha256(labels) != str(data["labels_sha256"]):
            raise ValueError(
                f"{which} holds other labels than split {path} was made from: another "
                "model's or dataset's logits copied over? cache these logits again, or "
                "rebuild the split from them"
            )
    return val, test


def load_halves(logits_path, split_path) -> dict:
    """Logits file plus split: ``{"meta": {...}, "val": (logits, labels), "test": (...)}``.

    The logits file is read and validated by :func:`calbench.logits.load_logits`. ``meta`` also
    holds the file's identity (``order_hash``, ``logits_sha256``) that calibrators record.
    """
    from calbench.logits import load_logits  # lazy: code inputs

    data = load_logits(logits_path)
    val, test = load_split(
        split_path,
        len(data["labels"]),
        data["order_hash"],
        labels=data["labels"],
        logits_path=logits_path,
    )
    z, y = data["logits"], data["labels"]
    return {
        "meta": {
            "model": data["model"],
            "dataset": data["dataset"],
            "order_hash": data["order_hash"],
            "logits_sha256": file_digest(logits_path),
        },
        "val": (z[val], y[val]),
        "test": (z[test], y[test]),
    }


def split_logits_files(logits_paths, out, seed: int = 0) -> dict:
    """Step ``split`` of a dataset whose models' logits all come from files (no dataset to read,
    :func:`split_dataset`): the study split of ``logits_paths`` (they must agree: same N, labels
    and sample order, :func:`check_logits_files_agree`), saved to ``out`` with the logits' order
    hash and labels. Returns ``{"n", "val", "test", **digests}``."""
    from calbench.logits import load_logits  # lazy: code inputs

    metas = []
    for path in logits_paths:
        d = load_logits(path)
        metas.append(
            {
                "path": path,
                "n": d["labels"].shape[0],
                "labels": d["labels"],
                "order_hash": d["order_hash"],
            }
        )
    check_logits_files_agree(metas)
    return _save_study_split(out, metas[0]["labels"], metas[0]["order_hash"], seed)


#: a preset for the streamed datasets' ``stream_split``, which needs one to build its image
#: transform; :func:`dataset_order` reads the samples' identities and labels only, never an image
_ORDER_ONLY_PRESET = {"preprocessing": "cifar10_huy"}


def dataset_order(
    dataset: str, data_root, *, options: dict | None = None, limit: int | None = None
) -> tuple[np.ndarray, str]:
    """``(labels int64, order_hash)`` of the first ``limit`` samples of ``dataset``'s test split
    under ``data_root`` (``options``: the dataset entry's overrides of its pinned files), as
    :func:`calbench.logits.cache_logits` records them for every model of the dataset: the
    dataset's own labels and sample order, which no model's logits are needed for."""
    from calbench.data import get_dataset, ids_order_hash, order_hash  # lazy: code inputs

    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be an integer >= 1, got {limit!r}")
    data = get_dataset(dataset, options)
    if getattr(data, "STREAMING", False):
        stream = data.stream_split(data_root, "test", _ORDER_ONLY_PRESET)
        ids, labels = list(stream.ids)[:limit], list(stream.labels)[:limit]
        labels = np.asarray(labels, dtype=np.int64)
        return labels, ids_order_hash(ids, labels)
    images, labels = data.load_split(data_root, "test")
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    ohash = order_hash(images, labels)
    labels = labels.numpy() if hasattr(labels, "numpy") else np.asarray(labels)
    return labels.astype(np.int64), ohash


def split_dataset(
    dataset: str, data_root, out, *, options: dict | None = None, limit=None, seed: int = 0
) -> dict:
    """Step ``split`` of a dataset the workflow reads (its models' logits computed by
    ``cache-logits``): the study split of its N samples, saved to ``out`` with the dataset's
    labels and order hash (:func:`dataset_order`), against which every model's logits are
    checked when read with it (:func:`load_split`). A function of the dataset entry (and its
    ``limit``) only: adding, retraining or re-caching a model leaves it as it is. Returns
    ``{"n", "val", "test", **digests}``."""
    labels, ohash = dataset_order(dataset, data_root, options=options, limit=limit)
    return _save_study_split(out, labels, ohash, seed)


def _save_study_split(out, labels, ohash: str, seed: int) -> dict:
    n = int(np.asarray(labels).shape[0])
    val, test = study_split(n, seed=seed)
    digests = save_split(
        out, val, test, order_hash=np.str_(ohash), n=np.int64(n), seed=np.int64(seed), labels=labels
    )
    return {"n": n, "val": len(val), "test": len(test), **digests}
