import gzip
import hashlib
import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from calbench.data import DATASETS, Dataset, get_dataset, order_hash
from calbench.data import fashion_mnist as fm
from calbench.data.download import ChecksumError
from calbench.io import array_digest

DEBIAN = Path("/usr/share/datasets/fashion-mnist")
needs_debian = pytest.mark.skipif(
    not (DEBIAN / "t10k-labels-idx1-ubyte.gz").is_file(),
    reason="Debian package dataset-fashion-mnist is not installed",
)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    if not (DEBIAN / "t10k-labels-idx1-ubyte.gz").is_file():
        pytest.skip("Debian package dataset-fashion-mnist is not installed")
    root = tmp_path_factory.mktemp("fmnist")
    manifest = fm.prepare(root, mirrors=[DEBIAN], urls=())
    return root, manifest


# ---------------------------------------------------------------- IDX parsing (known answers)


def _idx(shape, values):
    return (
        struct.pack(">BBBB", 0, 0, 8, len(shape))
        + struct.pack(f">{len(shape)}i", *shape)
        + bytes(values)
    )


def test_parse_idx_reads_a_hand_built_file():
    arr = fm.parse_idx(_idx((2, 3), [1, 2, 3, 4, 5, 255]))
    assert arr.dtype == np.uint8
    np.testing.assert_array_equal(arr, [[1, 2, 3], [4, 5, 255]])


@pytest.mark.parametrize(
    "data, match",
    [
        (b"\x01\x00\x08\x01\x00\x00\x00\x01\x07", "bad magic"),
        (b"\x00\x00\x0d\x01\x00\x00\x00\x01\x07", "not unsigned byte"),
        (_idx((4,), [1, 2, 3, 4])[:-1], "truncated or corrupt"),
        (b"\x00\x00\x08\x03\x00", "header is truncated"),
    ],
)
def test_parse_idx_refuses_corrupt_content(data, match):
    with pytest.raises(ValueError, match=match):
        fm.parse_idx(data)


def test_check_split_content_refuses_wrong_label_counts():
    images = np.zeros((10_000, 1, 28, 28), np.uint8)
    labels = np.repeat(np.arange(10), 1000)
    assert fm.check_split_content(images, labels, "test") == [1000] * 10
    labels[0] = 1
    with pytest.raises(ValueError, match="not 1000 per class"):
        fm.check_split_content(images, labels, "test")
    with pytest.raises(ValueError, match="expected"):
        fm.check_split_content(images[:5], labels[:5], "test")


def test_registry_and_unknown_dataset():
    assert get_dataset("fashion_mnist") is fm.FASHION_MNIST
    assert DATASETS["fashion_mnist"] == "calbench.data.fashion_mnist:FASHION_MNIST"
    assert isinstance(fm.FASHION_MNIST, Dataset) and fm.FASHION_MNIST.NUM_CLASSES == 10
    with pytest.raises(ValueError, match="dataset fashion_mnist takes no options, got \\['md5'\\]"):
        get_dataset("fashion_mnist", {"md5": "x"})
    with pytest.raises(ValueError, match="unknown dataset 'mnist'"):
        get_dataset("mnist")


def test_order_hash_is_the_array_digest_of_uint8_images_and_int64_labels():
    images = np.arange(2 * 4, dtype=np.uint8).reshape(2, 1, 2, 2)
    labels = np.array([3, 1], dtype=np.int32)
    assert order_hash(images, labels) == array_digest(images, labels.astype(np.int64))
    assert order_hash(images[::-1], labels[::-1]) != order_hash(images, labels)


def test_preprocessor_standardises_with_the_training_statistics():
    import torch

    f = fm.preprocessor({})
    out = f(torch.tensor([0, 51, 255], dtype=torch.uint8).view(3, 1, 1, 1))
    assert out.dtype == torch.float32
    expected = (np.array([0.0, 0.2, 1.0]) - 0.2860406) / 0.3530242
    np.testing.assert_allclose(out.flatten().numpy(), expected, rtol=1e-6)


# ---------------------------------------------------------------- the real files


@needs_debian
def test_prepare_places_verified_files_that_torchvision_loads(prepared):
    import torchvision

    root, manifest = prepared
    for name, spec in fm.FILES.items():
        path = root / "FashionMNIST" / "raw" / name
        assert hashlib.sha256(path.read_bytes()).hexdigest() == spec.sha256
        assert path.stat().st_size == spec.size == manifest["files"][name]["bytes"]
        rec = manifest["files"][name]
        assert rec["source"] == str(DEBIAN / f"{name}.gz")
        # Debian re-compressed the files: the .gz differs from torchvision's, the content does not
        assert rec["gz_md5_matches_torchvision"] is False
    train = torchvision.datasets.FashionMNIST(str(root), train=True, download=False)
    test = torchvision.datasets.FashionMNIST(str(root), train=False, download=False)
    assert len(train) == 60_000 and len(test) == 10_000
    # first labels of the published files (ankle boot, T-shirt, T-shirt, dress, ...)
    assert train.targets[:10].tolist() == [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]
    assert test.targets[:10].tolist() == [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]
    assert manifest["splits"]["test"]["label_counts"] == [1000] * 10
    assert manifest["splits"]["train"]["label_counts"] == [6000] * 10
    json.dumps(manifest)  # JSON-able


@needs_debian
def test_load_split_matches_numpy_reader_and_manifest_order_hash(prepared):
    root, manifest = prepared
    images, labels = fm.load_split(root, "test")
    assert tuple(images.shape) == (10_000, 1, 28, 28) and str(images.dtype) == "torch.uint8"
    assert str(labels.dtype) == "torch.int64"
    x, y = fm.read_split_arrays(root, "test")
    np.testing.assert_array_equal(images.numpy(), x)
    np.testing.assert_array_equal(labels.numpy(), y)
    assert order_hash(images, labels) == manifest["splits"]["test"]["order_hash"]


@needs_debian
def test_mean_and_std_constants_are_the_training_pixel_statistics(prepared):
    root, _ = prepared
    x, _ = fm.read_split_arrays(root, "train")
    counts = np.bincount(x.ravel(), minlength=256).astype(np.float64)
    values = np.arange(256) / 255.0
    mean = (counts * values).sum() / counts.sum()
    std = np.sqrt((counts * (values - mean) ** 2).sum() / counts.sum())
    assert abs(mean - fm.MEAN) < 1e-6
    assert abs(std - fm.STD) < 1e-6


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """A miniature Fashion-MNIST (2 train and 1 test image per class) pinned like the real one,
    gzipped in a mirror directory; returns (mirror, {name: content})."""
    rng = np.random.default_rng(0)
    sizes = {"train": 20, "test": 10}
    contents, pins = {}, {}
    for prefix, split in (("train", "train"), ("t10k", "test")):
        n = sizes[split]
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.permutation(np.arange(n) % 10).astype(np.uint8)
        contents[f"{prefix}-images-idx3-ubyte"] = _idx((n, 28, 28), images.tobytes())
        contents[f"{prefix}-labels-idx1-ubyte"] = _idx((n,), labels.tobytes())
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name, data in contents.items():
        gz = gzip.compress(data, mtime=0)
        (mirror / f"{name}.gz").write_bytes(gz)
        split = "train" if name.startswith("train") else "test"
        kind = "images" if "images" in name else "labels"
        pins[name] = fm.IdxFile(
            split, kind, hashlib.sha256(data).hexdigest(), len(data), hashlib.md5(gz).hexdigest()
        )
    monkeypatch.setattr(fm, "FILES", pins)
    monkeypatch.setattr(fm, "SPLIT_SIZES", sizes)
    monkeypatch.setattr(fm, "PER_CLASS", {"train": 2, "test": 1})
    return mirror, contents


def test_tiny_prepare_records_sources_and_counts(tiny, tmp_path):
    mirror, contents = tiny
    manifest = fm.prepare(tmp_path / "root", mirrors=[mirror], urls=())
    for name, data in contents.items():
        assert (tmp_path / "root" / "FashionMNIST" / "raw" / name).read_bytes() == data
        rec = manifest["files"][name]
        assert rec["source"] == str(mirror / f"{name}.gz")
        assert rec["gz_md5_matches_torchvision"] is True  # the pinned .gz itself
    assert manifest["splits"]["train"]["label_counts"] == [2] * 10
    assert manifest["splits"]["test"]["n"] == 10


def test_a_mirror_with_wrong_content_is_skipped_for_the_next(tiny, tmp_path):
    mirror, contents = tiny
    bad = tmp_path / "bad"
    shutil.copytree(mirror, bad)
    data = bytearray(contents["t10k-labels-idx1-ubyte"])
    data[-1] = (data[-1] + 1) % 10  # one label changed: same size, wrong content
    (bad / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(bytes(data)))
    (bad / "t10k-images-idx3-ubyte.gz").write_bytes(b"not gzip at all")
    plain = tmp_path / "plain"
    plain.mkdir()
    for name, content in contents.items():
        (plain / name).write_bytes(content)
    manifest = fm.prepare(tmp_path / "root", mirrors=[bad, plain], urls=())
    files = manifest["files"]
    assert files["t10k-labels-idx1-ubyte"]["source"] == str(plain / "t10k-labels-idx1-ubyte")
    assert files["t10k-images-idx3-ubyte"]["source"] == str(plain / "t10k-images-idx3-ubyte")
    assert files["train-labels-idx1-ubyte"]["source"] == str(bad / "train-labels-idx1-ubyte.gz")


def test_only_a_corrupt_mirror_is_refused_and_leaves_no_file(tiny, tmp_path):
    mirror, contents = tiny
    data = bytearray(contents["t10k-labels-idx1-ubyte"])
    data[-1] = (data[-1] + 1) % 10
    (mirror / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(bytes(data)))
    root = tmp_path / "root"
    with pytest.raises(FileNotFoundError, match="t10k-labels-idx1-ubyte.*sha256"):
        fm.prepare(root, mirrors=[mirror], urls=())
    raw = root / "FashionMNIST" / "raw"
    assert not (raw / "t10k-labels-idx1-ubyte").exists()
    assert [p.name for p in raw.iterdir() if p.name.startswith(".")] == []


def test_right_hashes_but_unbalanced_labels_are_refused(tiny, tmp_path, monkeypatch):
    mirror, _ = tiny
    monkeypatch.setattr(fm, "PER_CLASS", {"train": 2, "test": 2})
    with pytest.raises(ValueError, match="label counts .* not 2 per class"):
        fm.prepare(tmp_path / "root", mirrors=[mirror], urls=())


def test_an_existing_file_with_wrong_content_is_refused(tiny, tmp_path):
    mirror, _ = tiny
    root = tmp_path / "root"
    fm.prepare(root, mirrors=[mirror], urls=())
    again = fm.prepare(root, mirrors=[], urls=())
    assert {r["source"] for r in again["files"].values()} == {"existing"}
    path = root / "FashionMNIST" / "raw" / "t10k-labels-idx1-ubyte"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match="does not match the pinned"):
        fm.prepare(root, mirrors=[mirror], urls=())


def test_nothing_found_names_the_file_and_the_fix(tmp_path):
    with pytest.raises(
        FileNotFoundError, match="could not obtain Fashion-MNIST file .*--mirror DIR"
    ):
        fm.prepare(tmp_path / "root", mirrors=[tmp_path / "empty"], urls=())


def test_download_checks_the_upstream_gz_md5_then_the_content(tiny, tmp_path, monkeypatch):
    mirror, contents = tiny
    url = mirror.as_uri()
    manifest = fm.prepare(tmp_path / "a", mirrors=[], urls=[url])
    rec = manifest["files"]["t10k-images-idx3-ubyte"]
    assert rec["source"] == "download" and rec["gz_md5_matches_torchvision"] is True
    # a re-compressed archive fails the upstream MD5 even though its content is right
    for name, data in contents.items():
        (mirror / f"{name}.gz").write_bytes(gzip.compress(data, compresslevel=1, mtime=1))
    with pytest.raises(FileNotFoundError, match="md5"):
        fm.prepare(tmp_path / "b", mirrors=[], urls=[url])


def test_load_split_without_files_says_how_to_fix(tmp_path):
    with pytest.raises(
        FileNotFoundError, match="calbench download-dataset --dataset fashion_mnist"
    ):
        fm.load_split(tmp_path, "test")
    with pytest.raises(ValueError, match="'train' or 'test'"):
        fm.load_split(tmp_path, "val")
