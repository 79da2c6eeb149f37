"""Fashion-MNIST (Xiao, Rasul and Vollgraf, 2017, arXiv:1708.07747): 70,000 28x28 grey images of
10 clothing classes, 60,000 for training and 10,000 for testing, in the IDX format of MNIST.

Files are placed where ``torchvision.datasets.FashionMNIST(root, download=False)`` finds them
(``root/FashionMNIST/raw/<name>``, decompressed). Each file's *decompressed* content is pinned by
SHA-256, so the same files are accepted whoever compressed them: Debian's ``dataset-fashion-mnist``
package ships the official IDX files re-compressed (its ``.gz`` MD5s differ from torchvision's
list), while a ``.gz`` downloaded from the upstream URL is also checked against torchvision's MD5.
Mirror directories (holding ``<name>.gz`` or ``<name>``) are tried before any URL.
"""

from __future__ import annotations

import gzip
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from calbench.data import order_hash
from calbench.data.base import Dataset
from calbench.data.download import ChecksumError, fetch, verify
from calbench.io import atomic_path, bytes_digest, file_digest

NAME = "fashion_mnist"
NUM_CLASSES = 10
INPUT_SHAPE = (1, 28, 28)
CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
#: Pixel mean and standard deviation of the 60,000 training images on the [0, 1] scale.
MEAN = 0.2860406
STD = 0.3530242
#: Directories searched for the files before any download (Debian package dataset-fashion-mnist).
DEFAULT_MIRRORS = ("/usr/share/datasets/fashion-mnist",)
#: Upstream location used by torchvision (files named ``<name>.gz``).
URLS = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",)
#: Sub-directory of ``root`` where torchvision's FashionMNIST class looks for the raw files.
RAW_SUBDIR = Path("FashionMNIST") / "raw"


@dataclass(frozen=True)
class IdxFile:
    split: str  # "train" or "test"
    kind: str  # "images" or "labels"
    sha256: str  # of the decompressed IDX content
    size: int  # decompressed bytes
    gz_md5: str  # torchvision's MD5 of the upstream .gz


FILES: dict[str, IdxFile] = {
    "train-images-idx3-ubyte": IdxFile(
        "train",
        "images",
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
        47_040_016,
        "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    ),
    "train-labels-idx1-ubyte": IdxFile(
        "train",
        "labels",
        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
        60_008,
        "25c81989df183df01b3e8a0aad5dffbe",
    ),
    "t10k-images-idx3-ubyte": IdxFile(
        "test",
        "images",
        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
        7_840_016,
        "bef4ecab320f06d8554ea6380940ec79",
    ),
    "t10k-labels-idx1-ubyte": IdxFile(
        "test",
        "labels",
        "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
        10_008,
        "bb300cfdad3c16e7a12a480ee83cd310",
    ),
}
#: Samples per split and per class per split.
SPLIT_SIZES = {"train": 60_000, "test": 10_000}
PER_CLASS = {"train": 6_000, "test": 1_000}


def raw_dir(root: str | os.PathLike) -> Path:
    """Directory holding the decompressed IDX files under ``root``."""
    return Path(root) / RAW_SUBDIR


# --------------------------------------------------------------------------------------------
# IDX parsing (LeCun et al.'s MNIST file format: magic, dimensions as big-endian int32, bytes)


def parse_idx(data: bytes) -> np.ndarray:
    """Parse an unsigned-byte IDX file's content into a uint8 array of its stated shape."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError("not an IDX file (bad magic number); the file is corrupt")
    if data[2] != 0x08:
        raise ValueError(f"IDX data type 0x{data[2]:02x} is not unsigned byte (0x08)")
    ndim = data[3]
    header = 4 + 4 * ndim
    if ndim == 0 or len(data) < header:
        raise ValueError("IDX header is truncated; the file is corrupt: download it again")
    shape = tuple(int(d) for d in np.frombuffer(data, dtype=">i4", count=ndim, offset=4))
    expected = header + int(np.prod(shape))
    if len(data) != expected:
        raise ValueError(
            f"IDX file holds {len(data)} bytes but its header {shape} needs {expected}; "
            "the file is truncated or corrupt: download it again"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def read_split_arrays(root: str | os.PathLike, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 1, 28, 28) uint8 and labels (N,) int64 of ``split`` read with numpy."""
    prefix = {"train": "train", "test": "t10k"}[split]
    raw = raw_dir(root)
    images = parse_idx((raw / f"{prefix}-images-idx3-ubyte").read_bytes())
    labels = parse_idx((raw / f"{prefix}-labels-idx1-ubyte").read_bytes())
    return images[:, None, :, :], labels.astype(np.int64)


def check_split_content(images: np.ndarray, labels: np.ndarray, split: str) -> list[int]:
    """Raise ``ValueError`` unless ``split`` has the published sizes and per-class counts.

    Returns the label counts per class.
    """
    n = SPLIT_SIZES[split]
    if images.shape != (n, *INPUT_SHAPE):
        raise ValueError(
            f"Fashion-MNIST {split} images have shape {images.shape}, expected {(n, *INPUT_SHAPE)}; "
            "the files are not Fashion-MNIST: delete them and download again"
        )
    if labels.shape != (n,) or labels.min() < 0 or labels.max() >= NUM_CLASSES:
        raise ValueError(
            f"Fashion-MNIST {split} labels have shape {labels.shape} and range "
            f"[{labels.min()}, {labels.max()}], expected ({n},) in [0, 9]; delete and download again"
        )
    counts = np.bincount(labels, minlength=NUM_CLASSES)
    if not np.all(counts == PER_CLASS[split]):
        raise ValueError(
            f"Fashion-MNIST {split} label counts {counts.tolist()} are not {PER_CLASS[split]} per "
            "class; the files are not Fashion-MNIST: delete them and download again"
        )
    return counts.tolist()


# --------------------------------------------------------------------------------------------
# placing the files


def _from_candidate(candidate: Path, dest: Path, spec: IdxFile) -> dict:
    """Copy (decompressing a ``.gz``) ``candidate`` to ``dest`` if its content is the pinned one."""
    record: dict = {"source": str(candidate)}
    with atomic_path(dest) as tmp:
        if candidate.suffix == ".gz":
            with gzip.open(candidate, "rb") as src, open(tmp, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            gz_md5 = file_digest(candidate, "md5")
            record["gz_md5"] = gz_md5
            record["gz_md5_matches_torchvision"] = gz_md5 == spec.gz_md5
        else:
            shutil.copyfile(candidate, tmp)
        verify(tmp, sha256=spec.sha256)
    return record


def _place(name: str, dest: Path, mirrors, urls, timeout: float) -> dict:
    spec = FILES[name]
    errors: list[str] = []
    for mirror in mirrors:
        for candidate in (
            Path(mirror).expanduser() / f"{name}.gz",
            Path(mirror).expanduser() / name,
        ):
            if not candidate.is_file():
                continue
            try:
                return _from_candidate(candidate, dest, spec)
            except (ChecksumError, OSError, EOFError) as exc:  # bad gzip raises OSError/EOFError
                errors.append(f"{candidate}: {exc}")
    if urls:
        gz = dest.with_name(f"{name}.gz")
        try:
            # the upstream .gz is exactly torchvision's: its MD5 is checked before decompressing
            fetch(
                gz,
                urls=[u.rstrip("/") + f"/{name}.gz" for u in urls],
                md5=spec.gz_md5,
                timeout=timeout,
            )
            record = _from_candidate(gz, dest, spec)
            record["source"] = "download"
            return record
        except (ChecksumError, FileNotFoundError, OSError, EOFError) as exc:
            errors.append(str(exc))
    tried = [str(m) for m in mirrors] + list(urls)
    raise FileNotFoundError(
        f"could not obtain Fashion-MNIST file {name} with the pinned content "
        f"(tried {', '.join(tried) or 'nothing'}: {'; '.join(errors) or 'not found'}); "
        f"copy {name}.gz into a mirror directory and pass --mirror DIR"
    )


def prepare(
    root: str | os.PathLike,
    *,
    mirrors=DEFAULT_MIRRORS,
    urls=URLS,
    timeout: float = 60.0,
) -> dict:
    """Place verified Fashion-MNIST files under ``root`` for torchvision and return a manifest.

    Files already present are kept when their SHA-256 matches (refused otherwise). After placing,
    each split's shape and per-class label counts (6,000 per class in train, 1,000 in test) are
    checked and its ``order_hash`` (:func:`calbench.data.order_hash`) recorded.
    """
    raw = raw_dir(root)
    raw.mkdir(parents=True, exist_ok=True)
    files: dict[str, dict] = {}
    for name, spec in FILES.items():
        dest = raw / name
        if dest.exists():
            verify(dest, sha256=spec.sha256)
            record = {"source": "existing"}
        else:
            record = _place(name, dest, list(mirrors), list(urls), timeout)
        record.update(sha256=spec.sha256, bytes=dest.stat().st_size)
        files[name] = record
    splits = {}
    for split in ("train", "test"):
        images, labels = read_split_arrays(root, split)
        counts = check_split_content(images, labels, split)
        splits[split] = {
            "n": int(labels.shape[0]),
            "label_counts": counts,
            "order_hash": order_hash(images, labels),
        }
    return {
        "dataset": NAME,
        "root": str(root),
        "torchvision_class": "torchvision.datasets.FashionMNIST",
        "files": files,
        "splits": splits,
        "manifest_sha256": bytes_digest("".join(f"{n}:{FILES[n].sha256}" for n in sorted(FILES))),
    }


# --------------------------------------------------------------------------------------------
# loading


def load_split(root: str | os.PathLike, split: str = "test"):
    """Return ``(images, labels)``: uint8 tensor (N, 1, 28, 28) and int64 tensor (N,) of ``split``
    ("train" or "test"), in the dataset's order: the arrays ``torchvision.datasets.FashionMNIST``
    reads from the same raw IDX files, parsed here with numpy (:func:`read_split_arrays`), since
    importing torchvision costs ~1.4 CPU-s (its ops import torch's compiler) in every training
    and logits job."""
    if split not in ("train", "test"):
        raise ValueError(f"Fashion-MNIST split must be 'train' or 'test', got {split!r}")
    import torch

    try:
        images, labels = read_split_arrays(root, split)
    except FileNotFoundError as exc:
        raise FileNotFoundError(
            f"Fashion-MNIST not found under {root} ({exc.filename} is missing); run "
            f"`calbench download-dataset --dataset fashion_mnist --root {root}` first"
        ) from None
    images = torch.from_numpy(np.array(images, dtype=np.uint8, copy=True))
    labels = torch.from_numpy(np.array(labels, dtype=np.int64, copy=True))
    if images.shape[0] != SPLIT_SIZES[split] or labels.shape[0] != images.shape[0]:
        raise ValueError(
            f"Fashion-MNIST {split} under {root} has {images.shape[0]} images, expected "
            f"{SPLIT_SIZES[split]}; delete {raw_dir(root)} and run download-dataset again"
        )
    return images, labels


def preprocessor(spec: dict | None = None):
    """Return ``f(uint8 batch (B, 1, 28, 28)) -> float32 batch``: scale to [0, 1], then
    standardise with the training set's mean and standard deviation. ``spec`` is unused."""

    def preprocess(batch):
        import torch

        return (batch.to(torch.float32) / 255.0 - MEAN) / STD

    return preprocess


class FashionMNIST(Dataset):
    """Fashion-MNIST as a :class:`calbench.data.base.Dataset` (no options: every file is
    pinned); the methods are this module's :func:`prepare`, :func:`load_split` and
    :func:`preprocessor`."""

    NAME = NAME
    NUM_CLASSES = NUM_CLASSES
    INPUT_SHAPE = INPUT_SHAPE
    DEFAULT_MIRRORS = DEFAULT_MIRRORS
    URLS = URLS

    def prepare(self, root, *, mirrors=DEFAULT_MIRRORS, urls=None, timeout: float = 60.0) -> dict:
        return prepare(root, mirrors=mirrors, urls=URLS if urls is None else urls, timeout=timeout)

    def load_split(self, root, split: str = "test"):
        return load_split(root, split)

    def preprocessor(self, spec: dict | None = None):
        return preprocessor(spec)


FASHION_MNIST = FashionMNIST()
