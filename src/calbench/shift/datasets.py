"""Corrupted test sets on disk: generated ones (:mod:`calbench.shift.corruptions`) and the
published CIFAR-10-C / CIFAR-100-C files (Hendrycks & Dietterich 2019), in one format.

Format (the published one): ``<corruption>.npy``, uint8 ``(5 N, H, W, C)``, severity-major (rows
``(s - 1) N .. s N - 1`` are severity s), image i of each block being the dataset's test image i
in its own order (torchvision order for CIFAR). Beside it ``<corruption>.json``, the manifest:
dataset, corruption, source (``generate`` | ``published``), n (images per severity), shape,
``sha256`` of the ``.npy`` file, ``order_hash`` of the clean test images and labels it was made
from (:func:`calbench.data.order_hash`), and for generated sets the seed and the parameters.
Every later step checks ``order_hash`` against the clean logits, so corrupted image i and clean
image i are the same sample, and the report lists the ``sha256`` of every file used.

Published archives (Zenodo records 2535967 and 3555552): one tar each, ``CIFAR-10-C/`` or
``CIFAR-100-C/`` holding 19 ``<corruption>.npy`` of shape (50000, 32, 32, 3) and ``labels.npy``
(50000,) uint8. The tar is pinned by the MD5 Zenodo lists (and, for CIFAR-10-C, the SHA-256
TensorFlow Datasets lists). No checksum of the single ``.npy`` members is published anywhere
we found, so each extracted member is *pinned on first use*: the SHA-256 of its array data
(the uint8 bytes in C order, independent of the ``.npy`` header) is written to
``pins/<corruption>.npy.sha256`` beside the outputs the first time, once the member is shown to
belong to the clean test set (its labels equal the test labels in order), and every later
extraction must reproduce it.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np

from calbench.data import get_dataset, order_hash
from calbench.data.download import fetch, verify
from calbench.io import atomic_path, atomic_write_text, bytes_digest, file_digest
from calbench.shift.corruptions import PARAMS, SEVERITIES, check_corruption, corrupt

#: The published corrupted test sets: dataset slug -> archive facts.
PUBLISHED: dict[str, dict] = {
    "cifar10": {
        "archive": "CIFAR-10-C.tar",
        "urls": ["https://zenodo.org/records/2535967/files/CIFAR-10-C.tar?download=1"],
        "md5": "56bf5dcef84df0e2308c6dcbcbbd8499",  # Zenodo record 2535967
        "sha256": "c72763e101c723b7c507b96205f7e938912a5d587376173b825850cf3cb876a7",  # TFDS
        "folder": "CIFAR-10-C",
        "size_mb": 2784,
    },
    "cifar100": {
        "archive": "CIFAR-100-C.tar",
        "urls": ["https://zenodo.org/records/3555552/files/CIFAR-100-C.tar?download=1"],
        "md5": "11f0ed0f1191edbf9fa23466ae6021d3",  # Zenodo record 3555552
        "sha256": None,
        "folder": "CIFAR-100-C",
        "size_mb": 2784,
    },
}
#: Corruptions in the published archives (15 benchmark + 4 extra), file stems.
PUBLISHED_CORRUPTIONS = (
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur",
    "motion_blur", "zoom_blur", "snow", "frost", "fog", "brightness", "contrast",
    "elastic_transform", "pixelate", "jpeg_compression", "speckle_noise", "gaussian_blur",
    "spatter", "saturate",
)  # fmt: skip
ARCHIVE_OPTION_KEYS = ("archive", "urls", "md5", "sha256", "folder")


def published_spec(dataset: str, options: dict | None = None) -> dict:
    """The archive facts of ``dataset`` (:data:`PUBLISHED`) with ``options`` overriding them
    (e.g. a test-made archive's MD5)."""
    if dataset not in PUBLISHED:
        raise ValueError(
            f"no published corrupted set for dataset {dataset!r}; published sets exist for "
            f"{sorted(PUBLISHED)} (use shift.source: generate for other datasets)"
        )
    spec = dict(PUBLISHED[dataset])
    unknown = sorted(set(options or {}) - set(ARCHIVE_OPTION_KEYS))
    if unknown:
        raise ValueError(
            f"unknown archive option(s) {unknown}; allowed: {list(ARCHIVE_OPTION_KEYS)}"
        )
    options = dict(options or {})
    if "md5" in options or "sha256" in options:  # the pinned pair belongs to the published file
        spec["md5"], spec["sha256"] = options.pop("md5", None), options.pop("sha256", None)
        if not spec["md5"] and not spec["sha256"]:
            raise ValueError("an archive override needs md5 or sha256; never accept it unverified")
    spec.update({k: v for k, v in options.items() if v is not None})
    return spec


def download_corrupted(dataset: str, out, *, mirrors=(), options=None, timeout=60.0) -> Path:
    """Place the checksum-verified published archive of ``dataset`` at ``out`` (mirror
    directories holding a file of the archive's name first, then the URLs)."""
    spec = published_spec(dataset, options)
    return fetch(
        out,
        urls=spec["urls"],
        mirrors=mirrors,
        md5=spec["md5"],
        sha256=spec.get("sha256"),
        filename=spec["archive"],
        timeout=timeout,
    )


# --------------------------------------------------------------------------------------------
# reading and writing the format


def manifest_path(npy) -> Path:
    return Path(npy).with_suffix(".json")


def write_corrupted(out, images: np.ndarray, manifest: dict) -> dict:
    """Write ``images`` (5 N, H, W, C) uint8 to ``out`` and its manifest beside it (atomically).

    Returns the manifest with ``sha256``, ``n`` and ``shape`` filled in."""
    images = np.ascontiguousarray(images)
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[0] % len(SEVERITIES):
        raise ValueError(
            f"corrupted images must be uint8 (5 N, H, W, C), got {images.dtype} {images.shape}"
        )
    with atomic_path(out) as tmp:
        np.save(tmp, images, allow_pickle=False)
    manifest = {
        **manifest,
        "n": int(images.shape[0] // len(SEVERITIES)),
        "shape": list(images.shape),
        "sha256": file_digest(out),
    }
    atomic_write_text(manifest_path(out), json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def read_manifest(npy) -> dict:
    path = manifest_path(npy)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} (the manifest of {npy}) does not exist; run calbench corrupt-dataset again"
        )
    try:
        manifest = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path} is not valid JSON ({exc.msg}); run corrupt-dataset again"
        ) from None
    missing = [k for k in ("corruption", "n", "sha256", "order_hash") if k not in manifest]
    if missing:
        raise ValueError(f"{path} lacks {missing}; run calbench corrupt-dataset again")
    return manifest


def load_corrupted(npy, *, mmap: bool = True) -> tuple[np.ndarray, dict]:
    """``(images (5, N, H, W, C) uint8, manifest)`` of a corrupted set file (memory-mapped)."""
    npy = Path(npy)
    if not npy.is_file():
        raise FileNotFoundError(f"corrupted set {npy} does not exist; run calbench corrupt-dataset")
    manifest = read_manifest(npy)
    try:
        arr = np.load(npy, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"cannot read {npy} ({exc}); delete it and run corrupt-dataset again"
        ) from None
    if arr.ndim == 3:
        arr = arr[..., None]
    n = int(manifest["n"])
    if arr.dtype != np.uint8 or arr.ndim != 4 or arr.shape[0] != len(SEVERITIES) * n:
        raise ValueError(
            f"{npy} holds {arr.dtype} {arr.shape}, its manifest says {len(SEVERITIES)} x {n} uint8 "
            "images; delete both and run corrupt-dataset again"
        )
    return arr.reshape(len(SEVERITIES), n, *arr.shape[1:]), manifest


def _clean_test(dataset: str, data_root, limit, dataset_options):
    """Clean test images (N, H, W, C) uint8, labels int64, order hash (first ``limit``)."""
    ds = get_dataset(dataset, dataset_options)
    if getattr(ds, "STREAMING", False):
        raise ValueError(
            f"dataset {dataset} is streamed from files (too large to corrupt in memory); "
            "corrupted sets exist for in-memory datasets (Fashion-MNIST, CIFAR) only"
        )
    images, labels = ds.load_split(data_root, "test")
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    ohash = order_hash(images, labels)
    x = images.numpy().transpose(0, 2, 3, 1)
    return np.ascontiguousarray(x), labels.numpy().astype(np.int64), ohash


def _check_limit(limit):
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be an integer >= 1, got {limit!r}")


def generate_corrupted(
    dataset: str,
    corruption: str,
    *,
    data_root,
    out,
    seed: int = 0,
    limit: int | None = None,
    dataset_options: dict | None = None,
) -> dict:
    """Corrupt ``dataset``'s test images (the first ``limit``) at severities 1-5, write ``out``
    (``<corruption>.npy``) and its manifest; return the manifest."""
    check_corruption(corruption)
    _check_limit(limit)
    x, _, ohash = _clean_test(dataset, data_root, limit, dataset_options)
    stacked = np.concatenate([corrupt(x, corruption, s, seed) for s in SEVERITIES])
    return write_corrupted(
        out,
        stacked,
        {
            "dataset": dataset,
            "corruption": corruption,
            "source": "generate",
            "seed": int(seed),
            "params": [list(p) if isinstance(p, tuple) else p for p in PARAMS[corruption]],
            "order_hash": ohash,
        },
    )


def _pin(pin_file: Path, digest: str, what: str) -> str:
    """Pin-on-first-use: record ``digest`` in ``pin_file`` or check it against the record."""
    if pin_file.is_file():
        pinned = pin_file.read_text().split()[0] if pin_file.read_text().strip() else ""
        if pinned != digest:
            raise ValueError(
                f"{what} has SHA-256 {digest[:16]}... but {pin_file} pinned {pinned[:16]}... on "
                "first use; the archive changed: delete the archive and fetch it again (or delete "
                "the pin if the new file is trusted)"
            )
        return "verified against first-use pin"
    atomic_write_text(pin_file, digest + "\n")
    return "pinned on first use"


def _read_member(tf: tarfile.TarFile, name: str, archive) -> np.ndarray:
    try:
        member = tf.getmember(name)
    except KeyError:
        raise ValueError(
            f"{archive} has no member {name}; is it the published archive? "
            f"(members: {', '.join(sorted(tf.getnames())[:5])}, ...)"
        ) from None
    if not member.isfile():
        raise ValueError(f"{archive}: {name} is not a regular file; refusing it")
    fh = tf.extractfile(member)
    try:
        return np.lib.format.read_array(io.BytesIO(fh.read()), allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise ValueError(f"{archive}: {name} is not a readable .npy ({exc})") from None


def extract_published(
    dataset: str,
    corruption: str,
    *,
    archive,
    data_root,
    out,
    limit: int | None = None,
    options: dict | None = None,
    dataset_options: dict | None = None,
) -> dict:
    """Extract ``corruption`` of the published archive of ``dataset`` to ``out`` (the first
    ``limit`` images of every severity), check its labels against the clean test set, pin it on
    first use; return the manifest."""
    _check_limit(limit)
    spec = published_spec(dataset, options)
    if corruption not in PUBLISHED_CORRUPTIONS:
        raise ValueError(
            f"unknown published corruption {corruption!r}; choose from {list(PUBLISHED_CORRUPTIONS)}"
        )
    verify(archive, md5=spec["md5"], sha256=spec.get("sha256"))
    _, labels, ohash = _clean_test(dataset, data_root, limit, dataset_options)
    folder = spec["folder"]
    with tarfile.open(archive) as tf:
        images = _read_member(tf, f"{folder}/{corruption}.npy", archive)
        pub_labels = _read_member(tf, f"{folder}/labels.npy", archive)
    n_all = images.shape[0] // len(SEVERITIES)
    if (
        images.dtype != np.uint8
        or images.ndim != 4
        or images.shape[0] != len(SEVERITIES) * n_all
        or pub_labels.shape != (images.shape[0],)
    ):
        raise ValueError(
            f"{archive}: {corruption}.npy is {images.dtype} {images.shape} with labels "
            f"{pub_labels.shape}; expected uint8 (5 N, H, W, C) and (5 N,) labels"
        )
    digest = bytes_digest(np.ascontiguousarray(images).tobytes())
    n = labels.shape[0]
    if n > n_all:
        raise ValueError(f"{archive} holds {n_all} images per severity, the clean test set {n}")
    blocks = images.reshape(len(SEVERITIES), n_all, *images.shape[1:])[:, :n]
    pub = pub_labels.astype(np.int64).reshape(len(SEVERITIES), n_all)[:, :n]
    if not np.all(pub == labels[None, :]):
        raise ValueError(
            f"{archive}: the labels of {corruption} do not match the clean {dataset} test labels "
            "in order; the archive is not made from this test set"
        )
    # pinned only now: the member is shown to belong to this test set (labels in order)
    pin_status = _pin(
        Path(out).parent / "pins" / f"{corruption}.npy.sha256", digest, f"{corruption}.npy"
    )
    return write_corrupted(
        out,
        blocks.reshape(-1, *images.shape[1:]),
        {
            "dataset": dataset,
            "corruption": corruption,
            "source": "published",
            "archive": spec["archive"],
            "archive_md5": spec["md5"],
            "member_sha256": digest,
            "member_pin": pin_status,
            "order_hash": ohash,
        },
    )
