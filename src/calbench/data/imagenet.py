"""ImageNet 2012 (ILSVRC2012) validation set from a user-supplied path, in the study's order.

ImageNet cannot be downloaded without registration, so the user points the configuration at
either (a) a folder of class sub-folders (``n01440764/ILSVRC2012_val_00000293.JPEG`` ...), or
(b) a folder holding ``ILSVRC2012_img_val.tar`` and ``ILSVRC2012_devkit_t12.tar.gz``, which
:func:`prepare_val` verifies (MD5) and sorts into class folders using the devkit's ground truth.

Order (Vasilev 2021 protocol; timm's folder parser): class folders sorted by wnid (= the standard
1000-class index), files sorted by name within each folder -> targets 0,...,0 (50x), 1, ..., 999.
Not the ILSVRC2012_val_000xxxxx order.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
from pathlib import Path

from calbench.data import ids_order_hash
from calbench.data.base import Dataset, check_options
from calbench.data.download import verify
from calbench.data.preprocessing import transform_for
from calbench.data.tiny_imagenet import FileImageDataset

VAL_ARCHIVE = "ILSVRC2012_img_val.tar"
VAL_MD5 = "29b22e2961454d5413ddabcf34fc5622"
DEVKIT = "ILSVRC2012_devkit_t12.tar.gz"
DEVKIT_MD5 = "fa75699e90414af021442c21a62c3abf"
_WNID = re.compile(r"n\d{8}")
_EXT = {".jpeg", ".jpg", ".png"}

MISSING_HELP = (
    "download {val} (6.3 GB, MD5 {vmd5}) and {dev} (MD5 {dmd5}) from https://image-net.org/download-images "
    "(free registration, non-commercial terms), put both in one folder and set datasets.imagenet.path "
    "in the config (or --imagenet-path) to that folder, or to a folder of 1000 class sub-folders n01440764/..."
)


def _help() -> str:
    return MISSING_HELP.format(val=VAL_ARCHIVE, vmd5=VAL_MD5, dev=DEVKIT, dmd5=DEVKIT_MD5)


def parse_devkit(devkit: str | os.PathLike) -> list[str]:
    """The wnid of each validation image, in ``ILSVRC2012_val_%08d`` order, from the devkit.

    ``data/meta.mat`` maps ILSVRC2012_ID (1..1000, leaf synsets) to wnids; ``data/
    ILSVRC2012_validation_ground_truth.txt`` holds one ILSVRC2012_ID per validation image.
    """
    from scipy.io import loadmat

    meta = truth = None
    with tarfile.open(devkit) as tf:
        for m in tf.getmembers():
            if m.name.endswith("data/meta.mat"):
                meta = loadmat(io.BytesIO(tf.extractfile(m).read()), squeeze_me=True)["synsets"]
            elif m.name.endswith("data/ILSVRC2012_validation_ground_truth.txt"):
                truth = [int(x) for x in tf.extractfile(m).read().split()]
    if meta is None or truth is None:
        raise ValueError(
            f"{devkit} lacks data/meta.mat or the validation ground truth; is it {DEVKIT}?"
        )
    wnid_of = {int(s["ILSVRC2012_ID"]): str(s["WNID"]) for s in meta if int(s["num_children"]) == 0}
    return [wnid_of[i] for i in truth]


def prepare_val(
    source: str | os.PathLike,
    dest: str | os.PathLike,
    check_md5: bool = True,
    *,
    val_md5: str = VAL_MD5,
    devkit_md5: str = DEVKIT_MD5,
) -> Path:
    """Sort ``ILSVRC2012_img_val.tar`` into ``dest/<wnid>/<file>`` using the devkit; return ``dest``."""
    source, dest = Path(source), Path(dest)
    archive, devkit = source / VAL_ARCHIVE, source / DEVKIT
    for f in (archive, devkit):
        if not f.is_file():
            raise FileNotFoundError(f"{f} not found; {_help()}")
    if check_md5:
        verify(devkit, md5=devkit_md5)
        verify(archive, md5=val_md5)
    wnids = parse_devkit(devkit)
    tmp = dest.with_name(dest.name + ".partial")
    with tarfile.open(archive) as tf:
        for m in tf.getmembers():
            if not m.isfile():
                continue
            name = Path(m.name).name
            idx = int(re.search(r"(\d+)\.", name).group(1)) - 1
            out = tmp / wnids[idx] / name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(tf.extractfile(m).read())
    tmp.rename(dest)  # all or nothing
    return dest


def val_samples(path: str | os.PathLike) -> tuple[list[str], list[int], list[str]]:
    """``(relative paths, labels, wnids)`` of a class-folder tree in the study's order."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"ImageNet validation set not found at {path}; {_help()}")
    wnids = sorted(d.name for d in path.iterdir() if d.is_dir() and _WNID.fullmatch(d.name))
    if not wnids:
        raise FileNotFoundError(f"no class folders (n01440764/...) under {path}; {_help()}")
    paths, labels = [], []
    for i, w in enumerate(wnids):
        files = sorted(f.name for f in (path / w).iterdir() if f.suffix.lower() in _EXT)
        paths += [f"{w}/{f}" for f in files]
        labels += [i] * len(files)
    return paths, labels, wnids


def resolve_val(path: str | os.PathLike | None, prepared: str | os.PathLike) -> Path:
    """The class-folder tree for ``path``: the tree itself, or ``prepared`` built from the archives."""
    if path is None:
        raise FileNotFoundError(f"datasets.imagenet.path is not set; {_help()}")
    path, prepared = Path(path).expanduser(), Path(prepared)
    if (path / VAL_ARCHIVE).is_file() or (path / DEVKIT).is_file():
        return prepared if prepared.is_dir() else prepare_val(path, prepared)
    return path


# ----------------------------------------------------------------- calbench.data dataset interface
SIZE_MB = 6430
#: Dataset config keys: ``path`` (user-supplied copy) and the pinned names/MD5s.
OPTION_KEYS = ("path", "archive", "md5", "devkit", "devkit_md5", "size_mb")
_PINS = {"archive": VAL_ARCHIVE, "md5": VAL_MD5, "devkit": DEVKIT, "devkit_md5": DEVKIT_MD5}


def _is_class_tree(path: Path) -> bool:
    return path.is_dir() and any(d.is_dir() and _WNID.fullmatch(d.name) for d in path.iterdir())


def _place_val(val: Path, candidates: list[Path], opts: dict) -> None:
    """Make ``val`` the class-folder tree of the first candidate holding the two archives (sorted
    with the devkit) or a class-folder tree (linked)."""
    root = val.parent
    for c in candidates:
        if (c / VAL_ARCHIVE).is_file() and (c / DEVKIT).is_file():
            root.mkdir(parents=True, exist_ok=True)
            prepare_val(c, val, val_md5=opts["md5"], devkit_md5=opts["devkit_md5"])
            return
        if _is_class_tree(c):
            root.mkdir(parents=True, exist_ok=True)
            os.symlink(c.resolve(), val, target_is_directory=True)
            return
    if not candidates:
        raise FileNotFoundError(f"datasets.imagenet.path is not set; {_help()}")
    raise FileNotFoundError(
        f"{', '.join(map(str, candidates))}: neither {VAL_ARCHIVE} + {DEVKIT} nor class "
        f"folders found; {_help()}"
    )


class ImageNet(Dataset):
    """The ImageNet 2012 validation set as a :class:`calbench.data.base.Dataset`, from the
    user-supplied copy at ``options["path"]`` (config ``datasets.imagenet.path``); the other
    :data:`OPTION_KEYS` replace the pinned archive names, MD5s or size."""

    NAME = "imagenet"
    NUM_CLASSES = 1000
    INPUT_SHAPE = (3, 224, 224)  # the common size; each model's preset sets its own
    URLS: tuple[str, ...] = ()  # not downloadable: registration (see MISSING_HELP)
    FILES = ((VAL_ARCHIVE, 6430), (DEVKIT, 3))
    #: 50,000 full-size JPEGs do not fit one uint8 tensor: ``cache-logits`` streams them through
    #: a DataLoader with the model's preset transform (:meth:`stream_split`), in the study's order.
    STREAMING = True
    OPTION_KEYS = OPTION_KEYS

    def __init__(self, options: dict | None = None):
        options = {k: v for k, v in dict(options or {}).items() if v is not None}
        check_options(self.NAME, options, OPTION_KEYS)
        self.options = options
        self.pins = {k: options[k] for k in _PINS if k in options}
        self.SIZE_MB = options.get("size_mb", SIZE_MB)

    def prepare(self, root, *, mirrors=(), urls=None, timeout: float = 60.0) -> dict:
        """Make ``<root>/val`` the class-folder tree of the validation set and return the manifest.

        ``path`` (config ``datasets.imagenet.path``), then each mirror directory, may hold the
        two archives (sorted into ``<root>/val`` with the devkit, MD5s checked) or a class-folder
        tree (linked as ``<root>/val``). Nothing is downloaded: ImageNet needs a registration.
        """
        opts = {**_PINS, **self.pins}
        if opts["archive"] != VAL_ARCHIVE or opts["devkit"] != DEVKIT:
            raise ValueError(
                f"imagenet: the archives must be named {VAL_ARCHIVE} and {DEVKIT}; rename your copies"
            )
        path = self.options.get("path")
        val = Path(root) / "val"
        candidates = [Path(c).expanduser() for c in ([path] if path else []) + list(mirrors)]
        if val.is_symlink():  # a link made for an earlier path: follow the current configuration
            val.unlink()
        if not val.is_dir():
            _place_val(val, candidates, opts)
        paths, labels, wnids = val_samples(val)
        return {
            "dataset": self.NAME,
            "folder": str(val),
            "source": str(val.resolve()),
            "classes": len(wnids),
            "splits": {"val": {"n": len(paths), "order_hash": ids_order_hash(paths, labels)}},
        }

    def load_split(self, root, split: str = "val"):
        raise ValueError(
            "imagenet: 50,000 full-size images are streamed, not loaded at once; use stream_split"
        )

    def stream_split(self, root, split: str = "val", spec: dict | None = None):
        """Map-style dataset of ``<root>/val`` in the study's order, images transformed by the
        model spec's preset (:func:`calbench.data.preprocessing.transform_for`); has ``ids`` and
        ``labels``."""
        if split not in ("val", "test"):
            raise ValueError(f"imagenet: the study evaluates the 'val' split; got split={split!r}")
        folder = Path(root) / "val"
        if not folder.is_dir():
            raise FileNotFoundError(f"ImageNet validation set not found at {folder}; {_help()}")
        paths, labels, _ = val_samples(folder)
        return FileImageDataset(folder, paths, labels, transform_for(spec or {}))

    def preprocessor(self, spec: dict | None = None):
        raise ValueError(
            "imagenet: preprocessing resizes PIL images; it runs inside stream_split's DataLoader"
        )

    def configure(self, options: dict | None) -> ImageNet:
        return ImageNet({**self.options, **(options or {})})


IMAGENET = ImageNet()
