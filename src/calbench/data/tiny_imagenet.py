"""Tiny ImageNet validation set (10,000 images, 200 classes) in the study's sample order.

Order (replication protocol of Vasilev 2021, as in focal_calibration's loader): the
**lexicographic** sort of the ``val/images/*.JPEG`` paths (val_0, val_1, val_10, val_100, ...);
label = position of the image's wnid (``val/val_annotations.txt``) in the *sorted* ``wnids.txt``.
Grayscale images are converted to RGB. Images are 64x64 and are not resized.
The official zip is fetched with the MD5 that public loaders pin (not published officially).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable
from pathlib import Path

from calbench.data.base import Dataset, check_options
from calbench.data.download import fetch
from calbench.data.preprocessing import uint8_preprocessor

ARCHIVE = "tiny-imagenet-200.zip"
URLS = ["http://cs231n.stanford.edu/tiny-imagenet-200.zip"]
MD5 = "90528d7ca1a48142e341f4ef8d21d0de"
FOLDER = "tiny-imagenet-200"


def download_tiny_imagenet(
    root: str | os.PathLike,
    mirrors: Iterable[str | os.PathLike] = (),
    md5: str | None = MD5,
    timeout: float = 60.0,
    *,
    archive_name: str = ARCHIVE,
    urls: Iterable[str] = tuple(URLS),
) -> Path:
    """Fetch the zip (MD5-checked, mirrors first) into ``root`` and unpack it; return the folder.

    ``archive_name``/``urls`` replace the official file name and URLs (a config's overrides)."""
    root = Path(root)
    archive = fetch(root / archive_name, urls=urls, mirrors=mirrors, md5=md5, timeout=timeout)
    folder = root / FOLDER
    if not (folder / "val" / "val_annotations.txt").is_file():
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                if member.startswith("/") or ".." in Path(member).parts:
                    raise ValueError(
                        f"{archive} has an unsafe member {member!r}; refusing to unpack"
                    )
            zf.extractall(root)
    return folder


def val_samples(folder: str | os.PathLike) -> tuple[list[str], list[int], list[str]]:
    """``(relative paths, labels, sorted wnids)`` of the validation set in the study's order."""
    folder = Path(folder)
    wnids_file, ann_file = folder / "wnids.txt", folder / "val" / "val_annotations.txt"
    for f in (wnids_file, ann_file):
        if not f.is_file():
            raise FileNotFoundError(
                f"{f} not found; point datasets.tiny_imagenet at the unpacked {FOLDER} folder "
                f"or run `calbench stage` to fetch {ARCHIVE}"
            )
    wnids = sorted(w.strip() for w in wnids_file.read_text().split() if w.strip())
    index = {w: i for i, w in enumerate(wnids)}
    label_of = {}
    for line in ann_file.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) >= 2:
            if parts[1] not in index:
                raise ValueError(f"{ann_file}: wnid {parts[1]} of {parts[0]} is not in wnids.txt")
            label_of[parts[0]] = index[parts[1]]
    paths = sorted(
        str(p.relative_to(folder).as_posix()) for p in (folder / "val").glob("**/*.JPEG")
    )
    missing = [p for p in paths if Path(p).name not in label_of]
    if missing:
        raise ValueError(f"{len(missing)} validation images have no annotation (e.g. {missing[0]})")
    return paths, [label_of[Path(p).name] for p in paths], wnids


class FileImageDataset:
    """Map-style dataset over image files: ``(transform(RGB PIL image), label)``."""

    def __init__(self, folder, paths, labels, transform=None):
        self.folder, self.paths, self.labels, self.transform = (
            Path(folder),
            paths,
            labels,
            transform,
        )
        self.ids = list(paths)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int):
        from PIL import Image

        with Image.open(self.folder / self.paths[i]) as im:
            img = im.convert("RGB")
        return (self.transform(img) if self.transform else img), int(self.labels[i])


def tiny_imagenet_val_dataset(folder: str | os.PathLike, transform=None) -> FileImageDataset:
    paths, labels, _ = val_samples(folder)
    return FileImageDataset(folder, paths, labels, transform)


# ----------------------------------------------------------------- calbench.data dataset interface
NAME = "tiny_imagenet"
NUM_CLASSES = 200
INPUT_SHAPE = (3, 64, 64)
SIZE_MB = 237
#: Dataset config keys that may override the pinned archive (name, URLs, MD5).
OPTION_KEYS = ("archive", "urls", "md5", "size_mb")


def load_split(root, split: str = "val"):
    """uint8 ``(10000, 3, 64, 64)`` and int64 labels of ``<root>/tiny-imagenet-200/val`` in study order."""
    import numpy as np
    import torch
    from PIL import Image

    if split not in ("val", "test"):
        raise ValueError(f"tiny_imagenet: the study evaluates the 'val' split; got split={split!r}")
    folder = Path(root) / FOLDER
    paths, labels, _ = val_samples(folder)
    out = np.empty((len(paths), 3, 64, 64), dtype=np.uint8)
    for i, p in enumerate(paths):
        with Image.open(folder / p) as im:
            out[i] = np.asarray(im.convert("RGB"), dtype=np.uint8).transpose(2, 0, 1)
    return torch.from_numpy(out), torch.tensor(labels, dtype=torch.int64)


class TinyImageNet(Dataset):
    """The Tiny ImageNet validation set as a :class:`calbench.data.base.Dataset`; ``options``
    (config keys :data:`OPTION_KEYS`) replace the archive name, URLs, MD5 or size."""

    NAME = NAME
    NUM_CLASSES = NUM_CLASSES
    INPUT_SHAPE = INPUT_SHAPE
    OPTION_KEYS = OPTION_KEYS

    def __init__(self, options: dict | None = None):
        options = dict(options or {})
        check_options(NAME, options, OPTION_KEYS)
        a = {"archive": ARCHIVE, "urls": list(URLS), "md5": MD5, "size_mb": SIZE_MB}
        a.update({k: v for k, v in options.items() if v is not None})
        self.options, self.archive = options, a
        self.URLS = tuple(a["urls"])
        self.SIZE_MB = a["size_mb"]
        self.FILES = ((a["archive"], a["size_mb"]),)

    def prepare(self, root, *, mirrors=(), urls=None, timeout: float = 60.0) -> dict:
        """Fetch and unpack the zip under ``root``; the manifest records the validation-set size."""
        a = self.archive
        folder = download_tiny_imagenet(
            root,
            mirrors,
            md5=a["md5"],
            timeout=timeout,
            archive_name=a["archive"],
            urls=a["urls"] if urls is None else urls,
        )
        n = len(val_samples(folder)[0])
        return {
            "dataset": NAME,
            "archive": a["archive"],
            "md5": a["md5"],
            "folder": str(folder),
            "splits": {"val": {"n": n}},
        }

    def load_split(self, root, split: str = "val"):
        return load_split(root, split)

    def preprocessor(self, spec: dict | None = None):
        return uint8_preprocessor((spec or {}).get("preprocessing") or "tiny_focal")

    def configure(self, options: dict | None) -> TinyImageNet:
        return TinyImageNet({**self.options, **(options or {})})


TINY_IMAGENET = TinyImageNet()
