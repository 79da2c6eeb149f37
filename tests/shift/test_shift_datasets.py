"""Corrupted-set files: generated sets, and the CIFAR-10-C / CIFAR-100-C loader on archives the
test makes in the published layout (``CIFAR-10-C/<corruption>.npy`` (5 N, 32, 32, 3) uint8 and
``labels.npy`` (5 N,) uint8), downloaded from a local HTTP server."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import pickle
import tarfile
import threading

import numpy as np
import pytest

from calbench.data import cifar
from calbench.data.download import ChecksumError
from calbench.shift import datasets as D
from calbench.shift.corruptions import corrupt

N = 7


def md5(path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def write_cifar_test(root, name="cifar10", n=N, seed=0):
    """A CIFAR test batch in the python-pickle layout; returns (images HWC, labels, md5)."""
    rng = np.random.default_rng(seed)
    spec = cifar.SPECS[name]
    data = rng.integers(0, 256, size=(n, 3 * 32 * 32), dtype=np.uint8)
    labels = rng.integers(0, spec["num_classes"], size=n)
    folder = root / spec["folder"]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / spec["test_file"]
    with open(path, "wb") as fh:
        pickle.dump({"data": data, spec["label_key"]: labels.tolist()}, fh)
    images = data.reshape(n, 3, 32, 32).transpose(0, 2, 3, 1)
    return images, labels, md5(path)


def write_c_archive(path, labels, corruptions=("gaussian_noise", "contrast"), folder="CIFAR-10-C",
                    seed=1, label_offset=0):  # fmt: skip
    """A CIFAR-10-C-layout tar; returns {corruption: (5 N, 32, 32, 3) array}."""
    rng = np.random.default_rng(seed)
    arrays = {}
    n = len(labels)
    with tarfile.open(path, "w") as tf:

        def add(name, arr):
            buf = io.BytesIO()
            np.save(buf, arr)
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size = buf.tell()
            buf.seek(0)
            tf.addfile(info, buf)

        for c in corruptions:
            arrays[c] = rng.integers(0, 256, size=(5 * n, 32, 32, 3), dtype=np.uint8)
            add(f"{c}.npy", arrays[c])
        add("labels.npy", ((np.tile(labels, 5) + label_offset) % 10).astype(np.uint8))
    return arrays


@pytest.fixture()
def cifar_root(tmp_path):
    root = tmp_path / "cifar"
    images, labels, test_md5 = write_cifar_test(root)
    return root, images, labels, {"test_md5": test_md5}


@pytest.fixture()
def server(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a, **k: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield served, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_published_facts_are_pinned():
    assert D.PUBLISHED["cifar10"]["md5"] == "56bf5dcef84df0e2308c6dcbcbbd8499"
    assert D.PUBLISHED["cifar100"]["md5"] == "11f0ed0f1191edbf9fa23466ae6021d3"
    assert len(D.PUBLISHED_CORRUPTIONS) == 19
    with pytest.raises(ValueError, match="published sets exist for"):
        D.published_spec("fashion_mnist")
    with pytest.raises(ValueError, match="unverified"):
        D.published_spec("cifar10", {"md5": None})
    with pytest.raises(ValueError, match="unknown archive option"):
        D.published_spec("cifar10", {"mdd5": "x"})


def test_download_from_local_server_and_extract(tmp_path, cifar_root, server):
    root, images, labels, ds_opts = cifar_root
    served, url = server
    arrays = write_c_archive(served / "CIFAR-10-C.tar", labels)
    options = {"urls": [f"{url}/CIFAR-10-C.tar"], "md5": md5(served / "CIFAR-10-C.tar")}
    out_dir = tmp_path / "resources" / "corrupted" / "cifar10"
    archive = D.download_corrupted("cifar10", out_dir / "published.tar", options=options)
    assert md5(archive) == options["md5"]
    for c, arr in arrays.items():
        man = D.extract_published(
            "cifar10", c, archive=archive, data_root=root, out=out_dir / f"{c}.npy",
            options=options, dataset_options=ds_opts,
        )  # fmt: skip
        loaded, manifest = D.load_corrupted(out_dir / f"{c}.npy")
        assert loaded.shape == (5, N, 32, 32, 3)
        assert np.array_equal(loaded.reshape(arr.shape), arr)
        assert manifest == man and man["source"] == "published" and man["n"] == N
        assert man["member_pin"] == "pinned on first use"
        assert (out_dir / "pins" / f"{c}.npy.sha256").is_file()
    # a second extraction verifies against the pin
    man = D.extract_published(
        "cifar10", "contrast", archive=archive, data_root=root, out=out_dir / "contrast.npy",
        options=options, dataset_options=ds_opts, limit=4,
    )  # fmt: skip
    assert man["member_pin"] == "verified against first-use pin" and man["n"] == 4
    loaded, _ = D.load_corrupted(out_dir / "contrast.npy")
    assert np.array_equal(loaded, arrays["contrast"].reshape(5, N, 32, 32, 3)[:, :4])


def test_pinned_checksum_refuses_other_archives(tmp_path, cifar_root, server):
    _, _, labels, _ = cifar_root
    served, url = server
    write_c_archive(served / "CIFAR-10-C.tar", labels)
    # the real archive's pinned MD5: the test-made file is refused, nothing is left behind
    with pytest.raises(FileNotFoundError, match="c72763e1"):
        D.download_corrupted(
            "cifar10",
            tmp_path / "out" / "published.tar",
            options={"urls": [f"{url}/CIFAR-10-C.tar"]},
        )
    assert not (tmp_path / "out" / "published.tar").exists()


def test_pin_mismatch_and_label_mismatch(tmp_path, cifar_root):
    root, _, labels, ds_opts = cifar_root
    tar = tmp_path / "a.tar"
    write_c_archive(tar, labels)
    opts = {"md5": md5(tar)}
    out = tmp_path / "c" / "contrast.npy"
    D.extract_published("cifar10", "contrast", archive=tar, data_root=root, out=out,
                        options=opts, dataset_options=ds_opts)  # fmt: skip
    # another archive with the same member name: the first-use pin refuses it
    tar2 = tmp_path / "b.tar"
    write_c_archive(tar2, labels, seed=5)
    with pytest.raises(ValueError, match="pinned"):
        D.extract_published("cifar10", "contrast", archive=tar2, data_root=root, out=out,
                            options={"md5": md5(tar2)}, dataset_options=ds_opts)  # fmt: skip
    tar3 = tmp_path / "c.tar"
    write_c_archive(tar3, labels, label_offset=1)
    with pytest.raises(ValueError, match="labels"):
        D.extract_published("cifar10", "contrast", archive=tar3, data_root=root,
                            out=tmp_path / "d" / "contrast.npy", options={"md5": md5(tar3)},
                            dataset_options=ds_opts)  # fmt: skip
    assert not (tmp_path / "d" / "contrast.npy").exists()
    with pytest.raises(ChecksumError):
        D.extract_published("cifar10", "contrast", archive=tar3, data_root=root, out=out,
                            options=opts, dataset_options=ds_opts)  # fmt: skip
    with pytest.raises(ValueError, match="no member"):
        D.extract_published("cifar10", "fog", archive=tar, data_root=root, out=out,
                            options=opts, dataset_options=ds_opts)  # fmt: skip
    with pytest.raises(ValueError, match="unknown published corruption"):
        D.extract_published("cifar10", "rotation", archive=tar, data_root=root, out=out,
                            options=opts, dataset_options=ds_opts)  # fmt: skip


def test_cifar100_layout(tmp_path):
    root = tmp_path / "c100"
    _, labels, test_md5 = write_cifar_test(root, "cifar100")
    tar = tmp_path / "CIFAR-100-C.tar"
    labels10 = labels % 10  # the test archive writer keeps labels below 10
    arrays = write_c_archive(tar, labels10, folder="CIFAR-100-C")
    # the labels of the archive must be the clean ones: write the clean set with them
    root2 = tmp_path / "c100b"
    spec = cifar.SPECS["cifar100"]
    (root2 / spec["folder"]).mkdir(parents=True)
    data = np.zeros((N, 3072), np.uint8)
    with open(root2 / spec["folder"] / spec["test_file"], "wb") as fh:
        pickle.dump({"data": data, spec["label_key"]: labels10.tolist()}, fh)
    man = D.extract_published(
        "cifar100", "gaussian_noise", archive=tar, data_root=root2,
        out=tmp_path / "o" / "gaussian_noise.npy", options={"md5": md5(tar)},
        dataset_options={"test_md5": md5(root2 / spec["folder"] / spec["test_file"])},
    )  # fmt: skip
    assert man["archive"] == "CIFAR-100-C.tar" and man["n"] == N
    assert test_md5  # the first clean set was written in the published layout too
    loaded, _ = D.load_corrupted(tmp_path / "o" / "gaussian_noise.npy")
    assert np.array_equal(loaded.reshape(-1, 32, 32, 3), arrays["gaussian_noise"])


def test_generate_corrupted_matches_the_transform(tmp_path, cifar_root):
    root, images, labels, ds_opts = cifar_root
    out = tmp_path / "g" / "contrast.npy"
    man = D.generate_corrupted("cifar10", "contrast", data_root=root, out=out,
                               dataset_options=ds_opts)  # fmt: skip
    loaded, manifest = D.load_corrupted(out)
    for s in range(1, 6):
        assert np.array_equal(loaded[s - 1], corrupt(images, "contrast", s))
    from calbench.data import order_hash

    assert man["order_hash"] == order_hash(images.transpose(0, 3, 1, 2), labels)
    assert man["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert man["params"] == [0.75, 0.5, 0.4, 0.3, 0.15] and manifest["seed"] == 0
    # byte-identical on a second run
    before = out.read_bytes()
    D.generate_corrupted("cifar10", "contrast", data_root=root, out=out, dataset_options=ds_opts)
    assert out.read_bytes() == before
    D.generate_corrupted("cifar10", "rotation", data_root=root, out=tmp_path / "g" / "r.npy",
                         dataset_options=ds_opts, limit=3)  # fmt: skip
    assert D.load_corrupted(tmp_path / "g" / "r.npy")[0].shape == (5, 3, 32, 32, 3)


def test_load_corrupted_refuses_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="corrupt-dataset"):
        D.load_corrupted(tmp_path / "none.npy")
    out = tmp_path / "x.npy"
    D.write_corrupted(
        out, np.zeros((10, 4, 4, 1), np.uint8), {"corruption": "x", "order_hash": "h"}
    )
    D.load_corrupted(out)
    np.save(out, np.zeros((15, 4, 4, 1), np.uint8))
    with pytest.raises(ValueError, match="manifest says"):
        D.load_corrupted(out)
    with pytest.raises(ValueError, match="uint8"):
        D.write_corrupted(tmp_path / "y.npy", np.zeros((10, 4, 4, 1)), {})
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        D.load_corrupted(out)
