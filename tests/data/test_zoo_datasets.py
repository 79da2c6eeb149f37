"""Dataset readers on torchvision-format / official-layout files written by the tests."""

import hashlib
import io
import pickle
import tarfile
import zipfile

import numpy as np
import pytest
from PIL import Image

from calbench.data import cifar, imagenet, tiny_imagenet
from calbench.data.download import ChecksumError
from calbench.data.preprocessing import (
    PRESETS,
    build_transform,
    preset_from_timm_config,
    timm_data_config,
)


def md5(path):
    return hashlib.md5(path.read_bytes()).hexdigest()


def write_cifar(root, name, n=7, seed=0):
    rng = np.random.default_rng(seed)
    spec = cifar.SPECS[name]
    data = rng.integers(0, 256, size=(n, 3 * 32 * 32), dtype=np.uint8)
    labels = rng.integers(0, spec["num_classes"], size=n).tolist()
    folder = root / spec["folder"]
    folder.mkdir(parents=True)
    with open(folder / spec["test_file"], "wb") as fh:
        pickle.dump({"data": data, spec["label_key"]: labels, "coarse_labels": [0] * n}, fh)
    return data, labels, folder / spec["test_file"]


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_cifar_reader_order_and_layout(tmp_path, name):
    data, labels, f = write_cifar(tmp_path, name)
    ds = cifar.cifar_test_dataset(name, tmp_path, md5=md5(f))
    assert len(ds) == 7 and ds.ids[3] == f"{name}/test/00003"
    img, y = ds[4]
    assert y == labels[4]
    # pixel (row 2, col 5) of image 4: channel c at c*1024 + 2*32 + 5 in the CHW row
    assert np.asarray(img)[2, 5].tolist() == [int(data[4, c * 1024 + 2 * 32 + 5]) for c in range(3)]


def test_cifar_reader_agrees_with_torchvision(tmp_path, monkeypatch):
    import torchvision

    _, _, f = write_cifar(tmp_path, "cifar10", n=5, seed=1)
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(torchvision.datasets.CIFAR10, "_load_meta", lambda self: None)
    tv = torchvision.datasets.CIFAR10(str(tmp_path), train=False, download=False)
    ours = cifar.cifar_test_dataset("cifar10", tmp_path, md5=md5(f))
    for i in range(5):
        assert np.array_equal(np.asarray(ours[i][0]), np.asarray(tv[i][0]))
        assert ours[i][1] == tv[i][1]


def test_cifar_pinned_md5_refuses_other_files(tmp_path):
    write_cifar(tmp_path, "cifar10")
    with pytest.raises(ChecksumError, match="40351d58"):
        cifar.read_cifar_test("cifar10", tmp_path)
    with pytest.raises(FileNotFoundError, match="download-dataset cifar100"):
        cifar.read_cifar_test("cifar100", tmp_path)


def test_cifar_download_from_mirror(tmp_path):
    src = tmp_path / "src"
    _, _, f = write_cifar(src, "cifar10")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    with tarfile.open(mirror / "cifar-10-python.tar.gz", "w:gz") as tf:
        tf.add(src / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    with pytest.raises(
        FileNotFoundError, match="c58f3010"
    ):  # the mirror copy is not the real archive
        cifar.download_cifar("cifar10", tmp_path / "root", mirrors=[mirror])
    assert not (tmp_path / "root" / "cifar-10-python.tar.gz").exists()
    # the same fetch-unpack-verify through the dataset interface, pinned to the mirror's copy
    archive_md5 = md5(mirror / "cifar-10-python.tar.gz")
    ds = cifar.CIFAR10.configure({"md5": archive_md5, "test_md5": md5(f)})
    manifest = ds.prepare(tmp_path / "root", mirrors=[mirror], urls=())
    assert manifest == {
        "dataset": "cifar10",
        "archive": "cifar-10-python.tar.gz",
        "md5": archive_md5,
        "test_md5": md5(f),
        "folder": str(tmp_path / "root" / "cifar-10-batches-py"),
        "splits": {"test": {"n": 7}},
    }
    assert (tmp_path / "root" / "cifar-10-batches-py" / "test_batch").read_bytes() == f.read_bytes()


def jpeg(color, mode="RGB"):
    buf = io.BytesIO()
    Image.new(mode, (64, 64), color).save(buf, format="JPEG")
    return buf.getvalue()


def write_tiny(root, n_val=12):
    # 3 classes in a non-sorted wnids.txt; val images val_0 .. val_11
    wnids = ["n09999999", "n01000001", "n05000000"]
    base = root / "tiny-imagenet-200"
    (base / "val" / "images").mkdir(parents=True)
    (base / "wnids.txt").write_text("\n".join(wnids) + "\n")
    lines = []
    for i in range(n_val):
        w = wnids[i % 3]
        mode = "L" if i == 5 else "RGB"
        (base / "val" / "images" / f"val_{i}.JPEG").write_bytes(
            jpeg(0 if mode == "L" else (i * 20, 0, 0), mode)
        )
        lines.append(f"val_{i}.JPEG\t{w}\t0\t0\t63\t63")
    (base / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")
    return base, wnids


def test_tiny_imagenet_study_order(tmp_path):
    base, wnids = write_tiny(tmp_path)
    paths, labels, sorted_wnids = tiny_imagenet.val_samples(base)
    # lexicographic, not numeric: val_0, val_1, val_10, val_11, val_2, ...
    assert [p.rsplit("/", 1)[1] for p in paths[:5]] == [
        "val_0.JPEG",
        "val_1.JPEG",
        "val_10.JPEG",
        "val_11.JPEG",
        "val_2.JPEG",
    ]
    assert sorted_wnids == ["n01000001", "n05000000", "n09999999"]
    # val_10 has wnid wnids[10 % 3] = n01000001 -> label 0 in sorted order; val_2 -> n05000000 -> 1
    assert labels[2] == 0 and labels[4] == 1 and labels[0] == 2
    ds = tiny_imagenet.tiny_imagenet_val_dataset(base)
    img, _ = ds[paths.index("val/images/val_5.JPEG")]
    assert img.mode == "RGB"  # grayscale converted


def test_tiny_imagenet_from_zip(tmp_path):
    src = tmp_path / "src"
    base, _ = write_tiny(src)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    with zipfile.ZipFile(mirror / "tiny-imagenet-200.zip", "w") as zf:
        for p in sorted(base.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(src).as_posix())
    folder = tiny_imagenet.download_tiny_imagenet(
        tmp_path / "root", mirrors=[mirror], md5=md5(mirror / "tiny-imagenet-200.zip")
    )
    assert tiny_imagenet.val_samples(folder)[0] == tiny_imagenet.val_samples(base)[0]
    with pytest.raises(FileNotFoundError, match="90528d7c"):
        tiny_imagenet.download_tiny_imagenet(tmp_path / "root2", mirrors=[mirror])


def write_imagenet_archives(folder, n_classes=3, per_class=2):
    from scipy.io import savemat

    ids = list(range(1, n_classes + 1))
    wnids = [
        f"n0{9 - i}000000" for i in range(n_classes)
    ]  # ILSVRC2012_ID order != sorted wnid order
    synsets = np.zeros(
        n_classes + 1, dtype=[("ILSVRC2012_ID", "O"), ("WNID", "O"), ("num_children", "O")]
    )
    for k, (i, w) in enumerate(zip(ids, wnids, strict=True)):
        synsets[k] = (i, w, 0)
    synsets[n_classes] = (n_classes + 1, "n00000001", 5)  # an inner node, ignored
    buf = io.BytesIO()
    savemat(buf, {"synsets": synsets})
    truth = [ids[(j * 2) % n_classes] for j in range(n_classes * per_class)]
    with tarfile.open(folder / imagenet.DEVKIT, "w:gz") as tf:
        for name, data in (
            ("meta.mat", buf.getvalue()),
            ("ILSVRC2012_validation_ground_truth.txt", "\n".join(map(str, truth)).encode()),
        ):
            info = tarfile.TarInfo(f"ILSVRC2012_devkit_t12/data/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    with tarfile.open(folder / imagenet.VAL_ARCHIVE, "w") as tf:
        for j in range(len(truth)):
            data = jpeg((j, j, j))
            info = tarfile.TarInfo(f"ILSVRC2012_val_{j + 1:08d}.JPEG")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return wnids, truth


def test_imagenet_from_archive_plus_devkit(tmp_path):
    src = tmp_path / "user"
    src.mkdir()
    wnids, truth = write_imagenet_archives(src)
    with pytest.raises(ChecksumError, match="fa75699e"):  # the pinned devkit MD5 is checked
        imagenet.prepare_val(src, tmp_path / "prepared")
    folder = imagenet.prepare_val(src, tmp_path / "prepared", check_md5=False)
    paths, labels, got_wnids = imagenet.val_samples(folder)
    assert got_wnids == sorted(wnids)
    # sorted wnid folders, files sorted inside: labels non-decreasing, 2 per class
    assert labels == [0, 0, 1, 1, 2, 2]
    for p, y in zip(paths, labels, strict=True):
        j = int(p.split("_")[-1].split(".")[0]) - 1
        assert wnids[truth[j] - 1] == got_wnids[y]
    assert paths[0] < paths[1]


def test_missing_imagenet_explains_what_to_download(tmp_path):
    for bad in (None, tmp_path / "nope"):
        with pytest.raises(
            FileNotFoundError, match="ILSVRC2012_img_val.tar.*29b22e29.*datasets.imagenet.path"
        ):
            imagenet.val_samples(bad) if bad else imagenet.resolve_val(bad, tmp_path / "p")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="class folders"):
        imagenet.val_samples(tmp_path / "empty")


TIMM_PRESETS = {
    "tf_efficientnet_b8.ra_in1k": "timm_672_bicub",
    "mobilenetv2_120d.ra_in1k": "timm_224_bicub",
    "repvgg_b3.rvgg_in1k": "timm_224_bilin",
    "vgg19_bn.tv_in1k": "timm_224_bilin",
}


@pytest.mark.parametrize("name", sorted(TIMM_PRESETS))
def test_named_timm_presets_equal_timms_data_config(name):
    assert preset_from_timm_config(timm_data_config(name)) == PRESETS[TIMM_PRESETS[name]]


def test_timm_config_of_a_model_built_without_weights():
    import timm

    model = timm.create_model("mobilenetv2_120d.ra_in1k", pretrained=False)
    assert preset_from_timm_config(timm_data_config("", model=model)) == PRESETS["timm_224_bicub"]
    # the trap of section 0.2: the untagged b8 resolves to AdvProp weights with mean/std 0.5
    assert timm_data_config("tf_efficientnet_b8")["mean"] == (0.5, 0.5, 0.5)


def test_transforms_normalise_as_documented():
    import torch

    img = Image.new("RGB", (32, 32), (255, 0, 128))
    x = build_transform("cifar100_focal")(img)
    expected = [(1 - 0.485) / 0.229, (0 - 0.456) / 0.224, (128 / 255 - 0.406) / 0.225]
    torch.testing.assert_close(x[:, 0, 0], torch.tensor(expected), atol=1e-5, rtol=0)
    big = build_transform("timm_224_bilin")(Image.new("RGB", (300, 400)))
    assert tuple(big.shape) == (3, 224, 224)
    with pytest.raises(ValueError, match="unknown preprocessing preset"):
        build_transform("cifar100")


def test_dataset_interfaces_on_test_files(tmp_path, monkeypatch):
    import torch

    data, labels, f = write_cifar(tmp_path, "cifar100", n=4)
    x, y = cifar.CIFAR100.configure({"test_md5": md5(f)}).load_split(tmp_path, "test")
    assert x.dtype == torch.uint8 and tuple(x.shape) == (4, 3, 32, 32) and y.tolist() == labels
    assert x[1].flatten().tolist() == data[1].tolist()  # CHW bytes as stored
    # the uint8 batch path equals ToTensor + Normalize on the PIL image
    pre = cifar.CIFAR100.preprocessor({"preprocessing": "cifar100_focal"})
    ds = cifar.cifar_test_dataset(
        "cifar100", tmp_path, md5=md5(f), transform=build_transform("cifar100_focal")
    )
    torch.testing.assert_close(pre(x)[2], ds[2][0], atol=1e-6, rtol=0)
    base, _ = write_tiny(tmp_path / "t")
    xt, yt = tiny_imagenet.load_split(tmp_path / "t", "val")
    assert tuple(xt.shape) == (12, 3, 64, 64) and yt.tolist() == tiny_imagenet.val_samples(base)[1]
    with pytest.raises(ValueError, match="resizes"):
        cifar.CIFAR10.preprocessor({"preprocessing": "timm_224_bilin"})


def test_registered_datasets_and_imagenet_streaming(tmp_path):
    import torch

    from calbench.data import DATASETS, Dataset, get_dataset, ids_order_hash
    from calbench.logits import compute_logits_stream

    assert {"cifar10", "cifar100", "tiny_imagenet", "imagenet"} <= set(DATASETS)
    for name in DATASETS:  # every registered dataset states the interface
        ds = get_dataset(name)
        assert isinstance(ds, Dataset) and ds.NAME == name and ds.NUM_CLASSES > 1
        assert all(isinstance(f, str) and mb > 0 for f, mb in ds.FILES)
    tiny = get_dataset("tiny_imagenet", {"archive": "t.zip", "size_mb": 2})
    assert tiny.FILES == (("t.zip", 2),) and tiny.URLS == tuple(tiny_imagenet.URLS)
    assert tiny.configure({"md5": "ab"}).FILES == (("t.zip", 2),)
    assert get_dataset("cifar10").NUM_CLASSES == 10 and get_dataset("cifar100").NUM_CLASSES == 100
    with pytest.raises(ValueError, match="unknown dataset option"):
        get_dataset("cifar10", {"path": "x"})
    # a user-supplied class-folder tree, linked as <root>/val
    tree = tmp_path / "val"
    for k, w in enumerate(["n02000000", "n01000000"]):
        (tree / w).mkdir(parents=True)
        for j in (1, 0):
            Image.new("RGB", (40, 30), (k * 100, j * 100, 7)).save(tree / w / f"img_{j}.JPEG")
    with pytest.raises(FileNotFoundError, match="datasets.imagenet.path"):
        get_dataset("imagenet").prepare(tmp_path / "root")
    ds = get_dataset("imagenet", {"path": str(tree)})
    manifest = ds.prepare(tmp_path / "root")
    data = ds.stream_split(tmp_path / "root", "val", {"preprocessing": "timm_224_bilin"})
    assert data.ids == [
        "n01000000/img_0.JPEG",
        "n01000000/img_1.JPEG",
        "n02000000/img_0.JPEG",
        "n02000000/img_1.JPEG",
    ]
    assert data.labels == [0, 0, 1, 1]
    assert manifest["splits"]["val"] == {
        "n": 4,
        "order_hash": ids_order_hash(data.ids, [0, 0, 1, 1]),
    }
    net = torch.nn.Sequential(
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 5)
    )
    logits, y = compute_logits_stream(net, data, batch_size=3, progress=False)
    assert logits.shape == (4, 5) and y.tolist() == [0, 0, 1, 1]
    with torch.inference_mode():
        want = net(data[2][0][None]).numpy()  # one image through the preset transform by hand
    np.testing.assert_allclose(logits[2:3], want, rtol=1e-5, atol=1e-6)
