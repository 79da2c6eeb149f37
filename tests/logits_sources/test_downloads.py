"""Every download path of published logits, against local imitations of the services
(fake_services.py on 127.0.0.1), with files written here in the published formats.

Checked: the Yandex Disk public API in both layouts (Kaggle-style folders and the study's zips),
pagination, listing sha256/size verified, pin on first use into the lock file and verification
on later runs, a changed file refused; Git LFS media URL, then batch API, then mirrors, a size or
hash mismatch leaving nothing behind; a local copy fetching nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fake_services import FakeServices  # noqa: E402

from calbench.lockfile import LOCK_NAME  # noqa: E402
from calbench.logits import load_logits  # noqa: E402
from calbench.logits_sources import import_logits, obtain, plan_files  # noqa: E402
from calbench.logits_sources import services as S  # noqa: E402


def _pt_bytes(z: np.ndarray) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(torch.from_numpy(z), buf)
    return buf.getvalue()


def _targets(y) -> bytes:
    return "\n".join(str(int(v)) for v in y).encode()


def _study(n=40, k=10, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)).astype(np.float32)
    y = rng.integers(0, k, n)
    return z, y


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@pytest.fixture
def fake():
    with FakeServices() as f:
        yield f


def _yandex_entry(fake, folder, file, **extra):
    return {
        "dataset": "cifar10",
        "source": "logits",
        "logits": {
            "format": "coursework",
            "file": file,
            "folder": folder,
            "yandex_disk": {"public_key": fake.state.public_key, "api_base": fake.base},
            **extra,
        },
    }


# ------------------------------------------------------------------ Yandex Disk


@pytest.mark.parametrize(
    "layout",
    [
        {"pt": "/cifar10_v1/densenet121.pt", "targets": "/cifar10_v1/targets.txt"},  # Kaggle
        {"pt": "/logits/cifar10/v1/densenet121.pt", "targets": "/logits/cifar10/targets.txt"},  # zip
    ],
)
def test_yandex_both_layouts_and_pin_on_first_use(fake, tmp_path, layout):
    z, y = _study()
    pt = _pt_bytes(z)
    fake.state.disk = {
        layout["pt"]: pt,
        layout["targets"]: _targets(y),
        layout["pt"].replace("densenet121", "resnet18"): _pt_bytes(z + 1),
        "/cifar100/densenet121.pt": _pt_bytes(z * 2),  # same name in another folder
        "/cifar100/targets.txt": b"0",
    }
    res = tmp_path / "resources"
    entry = _yandex_entry(fake, "cifar10_v1", "densenet121.pt")
    out = tmp_path / "results/logits/cifar10/c10_densenet121.npz"
    s = import_logits("c10_densenet121", entry, out, resources=res)
    d = load_logits(out)
    np.testing.assert_array_equal(d["logits"], z)
    np.testing.assert_array_equal(d["labels"], y)
    assert [f["status"] for f in s["files"]] == ["pinned on first use"] * 2
    lock = json.loads((res / LOCK_NAME).read_text())["files"]
    rec = lock["logits/cifar10/c10_densenet121/densenet121.pt"]
    assert rec["sha256"] == _sha(pt) and rec["size"] == len(pt)
    assert "logits/cifar10/c10_densenet121/targets.txt" in lock
    # a later run with the file gone downloads again and verifies against the lock
    (res / "logits/cifar10/c10_densenet121/densenet121.pt").unlink()
    n_get = sum(1 for _, p in fake.state.log if p.startswith("/yadl/"))
    import_logits("c10_densenet121", entry, out, resources=res)
    assert sum(1 for _, p in fake.state.log if p.startswith("/yadl/")) == n_get + 1


def test_yandex_focal_layout_and_pagination(fake, tmp_path):
    z, y = _study(k=10)
    fake.state.disk = {f"/focal/CIFAR10/m{i}.pt": _pt_bytes(z + i) for i in range(7)}
    fake.state.disk["/focal/CIFAR10/targets.txt"] = _targets(y)
    disk = S.YandexDisk(fake.state.public_key, fake.base, limit=3)
    names = [e.path for e in disk.tree()]
    assert len(names) == 8  # 3 pages of 3, 3, 2 items
    listing_calls = [p for _, p in fake.state.log if p == "/v1/disk/public/resources"]
    assert len(listing_calls) == 1 + 1 + 3  # root, /focal, three pages of /focal/CIFAR10
    hit, targets = S.find_in_tree(disk.tree(), "focal_CIFAR10", "m5.pt", "disk")
    assert hit.path == "/focal/CIFAR10/m5.pt" and targets.path == "/focal/CIFAR10/targets.txt"
    entry = _yandex_entry(fake, "focal_CIFAR10", "m5.pt")
    got = obtain("f_m5", entry, tmp_path / "res")
    assert got["logits"].read_bytes() == fake.state.disk["/focal/CIFAR10/m5.pt"]


def test_yandex_missing_file_and_missing_targets(fake, tmp_path):
    z, y = _study(n=20, k=4)
    fake.state.disk = {"/imagenet/vgg19_bn.pt": _pt_bytes(z)}
    with pytest.raises(FileNotFoundError, match="no nope.pt in a folder named imagenet"):
        obtain("m", _yandex_entry(fake, "imagenet", "nope.pt"), tmp_path)
    with pytest.raises(FileNotFoundError, match="targets: class_blocks"):
        obtain("in_vgg", _yandex_entry(fake, "imagenet", "vgg19_bn.pt"), tmp_path / "r1")
    assert not any((tmp_path / "r1").rglob("*.pt"))  # nothing left behind
    entry = _yandex_entry(fake, "imagenet", "vgg19_bn.pt", targets="class_blocks")
    s = import_logits("in_vgg", entry, tmp_path / "o.npz", resources=tmp_path / "r2")
    assert s["targets"] == "class_blocks (synthesised)"
    assert load_logits(tmp_path / "o.npz")["labels"].tolist() == [0] * 5 + [1] * 5 + [2] * 5 + [3] * 5


def test_yandex_listing_hash_mismatch_leaves_nothing(fake, tmp_path):
    z, y = _study()
    fake.state.disk = {"/cifar100/a.pt": _pt_bytes(z), "/cifar100/targets.txt": _targets(y)}
    fake.state.listed_sha256_override["/cifar100/a.pt"] = "0" * 64
    res = tmp_path / "res"
    with pytest.raises(S.DownloadError, match="does not match the pinned 000000000000") as e:
        obtain("m", _yandex_entry(fake, "cifar100", "a.pt"), res)
    assert "\n" not in str(e.value)
    assert [p for p in res.rglob("*") if p.is_file()] == []
    assert not (res / LOCK_NAME).exists()


def test_yandex_changed_file_is_refused_by_the_lock(fake, tmp_path):
    z, y = _study()
    fake.state.list_sha256 = False  # nothing to check the first download against but the lock
    fake.state.disk = {"/cifar100/a.pt": _pt_bytes(z), "/cifar100/targets.txt": _targets(y)}
    res = tmp_path / "res"
    entry = _yandex_entry(fake, "cifar100", "a.pt")
    obtain("m", entry, res)
    dest = res / "logits/cifar10/m/a.pt"
    dest.unlink()
    fake.state.disk["/cifar100/a.pt"] = _pt_bytes(z + 1)  # same size, other bytes
    with pytest.raises(S.DownloadError, match="does not match the pinned"):
        obtain("m", entry, res)
    assert not dest.exists()
    # a corrupted copy already in resources/ is refused too (verified against the lock)
    fake.state.disk["/cifar100/a.pt"] = _pt_bytes(z)
    obtain("m", entry, res)
    dest.write_bytes(dest.read_bytes()[:-4] + b"xxxx")
    with pytest.raises(ValueError, match="pinned .*on first use"):
        obtain("m", entry, res)
    # the listing disagreeing with the lock is named before anything is downloaded
    dest.unlink()
    fake.state.list_sha256 = True
    fake.state.disk["/cifar100/a.pt"] = _pt_bytes(z + 2)
    with pytest.raises(ValueError, match="the service lists sha256"):
        obtain("m", entry, res)


def test_unknown_public_key_is_one_line(fake, tmp_path):
    entry = _yandex_entry(fake, "cifar100", "a.pt")
    entry["logits"]["yandex_disk"]["public_key"] = "https://disk.yandex.ru/d/OTHER"
    with pytest.raises(S.DownloadError) as e:
        obtain("m", entry, tmp_path)
    assert "404" in str(e.value) and "\n" not in str(e.value)


# ------------------------------------------------------------------ Git LFS (Kängsepp pickles)


def _kull_bytes(seed=0) -> bytes:
    rng = np.random.default_rng(seed)
    zv, zt = rng.normal(size=(30, 10)).astype(np.float32), rng.normal(size=(50, 10)).astype(np.float32)
    yv = rng.integers(0, 10, (30, 1)).astype(np.uint8)
    yt = rng.integers(0, 10, (50, 1))
    return pickle.dumps([(zv, yv), (zt, yt)], protocol=3)


def _lfs_entry(fake, data: bytes, urls=()):
    return {
        "dataset": "c10_kull",
        "source": "logits",
        "logits": {
            "format": "kull_pickle",
            "file": "probs_resnet110_c10_logits.p",
            "sha256": _sha(data),
            "size": len(data),
            "github_lfs": {
                "repo": "markus93/NN_calibration",
                "ref": "5bb76132ebfdad9733871a99666eff5b4934d60a",
                "path": "logits/probs_resnet110_c10_logits.p",
                "media_base": fake.base + "/media",
                "api_base": fake.base,
            },
            "urls": list(urls),
        },
    }


MEDIA_KEY = "markus93/NN_calibration/5bb76132ebfdad9733871a99666eff5b4934d60a/logits/probs_resnet110_c10_logits.p"


def test_lfs_media_url_first(fake, tmp_path):
    data = _kull_bytes()
    fake.state.media[MEDIA_KEY] = data
    out, split = tmp_path / "l.npz", tmp_path / "s.npz"
    s = import_logits("kull_resnet110", _lfs_entry(fake, data), out, split_out=split, resources=tmp_path / "r")
    assert s["files"][0]["status"] == "published checksum"
    assert s["split"] == {"val": 30, "test": 50, "source": "kull_pickle"}
    assert not any(m == "POST" for m, _ in fake.state.log)
    with np.load(split) as sp:
        assert sp["val_idx"].tolist() == list(range(30))
        assert sp["test_idx"].tolist() == list(range(30, 80))
    assert not (tmp_path / "r" / LOCK_NAME).exists()  # published checksums are not recorded


def test_lfs_pointer_or_quota_falls_back_to_batch_api(fake, tmp_path):
    data = _kull_bytes()
    pointer = (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{_sha(data)}\nsize {len(data)}\n"
    ).encode()
    fake.state.media[MEDIA_KEY] = pointer  # what raw.githubusercontent gives: the pointer
    fake.state.lfs[_sha(data)] = data
    got = obtain("k", _lfs_entry(fake, data), tmp_path)
    assert got["logits"].read_bytes() == data
    assert ("POST", "/markus93/NN_calibration.git/info/lfs/objects/batch") in fake.state.log


def test_lfs_then_mirror_url(fake, tmp_path):
    data = _kull_bytes()
    fake.state.media_status = 403  # over its data quota
    fake.state.batch_enabled = False
    fake.state.mirror["probs_resnet110_c10_logits.p"] = data
    entry = _lfs_entry(fake, data, urls=[fake.base + "/mirror/probs_resnet110_c10_logits.p"])
    got = obtain("k", entry, tmp_path)
    assert got["logits"].read_bytes() == data


def test_lfs_every_source_wrong_is_one_line_and_leaves_nothing(fake, tmp_path):
    data = _kull_bytes()
    fake.state.media[MEDIA_KEY] = data[:-10]  # truncated
    fake.state.lfs[_sha(data)] = data[:-1] + b"\x00"  # same size, wrong bytes
    fake.state.mirror["x.p"] = data + b"extra"  # too long
    entry = _lfs_entry(fake, data, urls=[fake.base + "/mirror/x.p"])
    res = tmp_path / "res"
    with pytest.raises(S.DownloadError) as e:
        import_logits("k", entry, tmp_path / "o.npz", split_out=tmp_path / "s.npz", resources=res)
    msg = str(e.value)
    assert "\n" not in msg
    assert f"{len(data) - 10} bytes, expected {len(data)}" in msg
    assert "does not match the pinned" in msg and "more than the expected" in msg
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


# ------------------------------------------------------------------ local copies


def test_local_folder_fetches_nothing(fake, tmp_path):
    z, y = _study()
    root = tmp_path / "download" / "logits"
    (root / "cifar10" / "v1").mkdir(parents=True)
    (root / "cifar10" / "v1" / "densenet121.pt").write_bytes(_pt_bytes(z))
    (root / "cifar10" / "targets.txt").write_bytes(_targets(y))
    entry = _yandex_entry(fake, "cifar10_v1", "densenet121.pt", local_path=str(tmp_path / "download"))
    s = import_logits("c10_densenet121", entry, tmp_path / "o.npz", resources=tmp_path / "r")
    assert fake.state.log == []
    np.testing.assert_array_equal(load_logits(tmp_path / "o.npz")["labels"], y)
    # a local copy of a downloadable file is pinned on first use, like a download
    assert s["files"][0]["status"] == "pinned on first use"
    # the same through a mirrors: directory
    entry["logits"].pop("local_path")
    got = obtain("c10_densenet121", entry, tmp_path / "r", mirrors=[tmp_path / "download"])
    assert got["logits"] == root / "cifar10" / "v1" / "densenet121.pt"
    assert fake.state.log == []


def test_local_file_with_pinned_checksum(tmp_path):
    data = _kull_bytes()
    f = tmp_path / "probs_resnet110_c10_logits.p"
    f.write_bytes(data)
    entry = {
        "dataset": "c10_kull",
        "source": "logits",
        "logits": {"format": "kull_pickle", "file": f.name, "sha256": _sha(data), "size": len(data), "local_path": str(f)},
    }
    obtain("k", entry, tmp_path / "r")
    f.write_bytes(data[:-1] + b"\x01")
    with pytest.raises(ValueError, match="does not match the pinned"):
        obtain("k", entry, tmp_path / "r")


def test_plan_files_marks_pins(fake, tmp_path):
    z, y = _study()
    fake.state.disk = {"/cifar100/a.pt": _pt_bytes(z), "/cifar100/targets.txt": _targets(y)}
    entry = _yandex_entry(fake, "cifar100", "a.pt")
    assert [p["pin"] for p in plan_files("m", entry, tmp_path)] == ["first use", "first use"]
    obtain("m", entry, tmp_path)
    assert [p["pin"] for p in plan_files("m", entry, tmp_path)] == ["lock", "lock"]
    data = _kull_bytes()
    assert plan_files("k", _lfs_entry(fake, data), tmp_path)[0]["pin"] == "pinned"


def test_strict_checksums_refuse_unpinned_downloads_before_fetching(fake, tmp_path):
    from calbench.lockfile import PinError

    z, y = _study()
    fake.state.disk = {"/cifar100/a.pt": _pt_bytes(z), "/cifar100/targets.txt": _targets(y)}
    entry = _yandex_entry(fake, "cifar100", "a.pt")
    with pytest.raises(PinError, match="strict checksums are on"):
        obtain("m", entry, tmp_path, strict=True)
    assert fake.state.log == [] and not any(tmp_path.rglob("*.pt"))
    obtain("m", entry, tmp_path)  # pinned on first use
    (tmp_path / "logits/cifar10/m/a.pt").unlink()
    obtain("m", entry, tmp_path, strict=True)  # now pinned in the lock file: accepted
    data = _kull_bytes()
    fake.state.media[MEDIA_KEY] = data
    obtain("k", _lfs_entry(fake, data), tmp_path, strict=True)  # published checksum
