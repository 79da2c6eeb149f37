"""Registry + pretrained loading on files the tests make (nothing is downloaded)."""

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
import torch

from calbench.data.download import ChecksumError
from calbench.models import pretrained as P
from calbench.models.staging import download_checkpoint

torch.set_num_threads(1)  # the CI machine's 2 cores are shared; threads oversubscribe

REGISTRY = Path(__file__).resolve().parents[2] / "config" / "coursework.yaml"


@pytest.fixture(scope="module")
def registry():
    return P.load_registry(REGISTRY)


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ----------------------------------------------------------------- registry content


def test_registry_has_the_77_models(registry):
    models = registry["models"]
    assert len(models) == 77
    count = lambda **kw: sum(all(m.get(k) == v for k, v in kw.items()) for m in models.values())  # noqa: E731
    assert count(dataset="cifar10", group=1, source="checkpoint") == 13
    assert count(dataset="cifar100", group=1, source="torchhub") == 15
    assert count(dataset="imagenet", source="timm") == 4
    assert count(group=2) == 45
    assert count(group=2, dataset="tiny_imagenet") == 5
    for ds in ("cifar10", "cifar100"):
        assert count(group=2, dataset=ds) == 20


def test_registry_pins(registry):
    for name, m in registry["models"].items():
        ck = m.get("checkpoint") or {}
        if m["source"] == "torchhub":
            assert m["hub"]["ref"] == "e8a3ffb2383c0be657199cd668d763b2233db91d"
            # torch.hub convention: the file name carries the sha256 prefix
            assert ck["filename"].rsplit("-", 1)[1] == ck["sha256"] + ".pt"
            assert ck["urls"][0].endswith("/" + ck["filename"])
        if m["source"] == "timm":
            assert "." in m["timm"]["name"], name
            assert ck["sha256"] in ck["filename"]
        if m.get("group") == 2:
            assert ck["strip_prefix"] == "module."
            assert ck["urls"][0].startswith(
                "https://www.robots.ox.ac.uk/~viveka/focal_calibration/"
            )
    b8 = registry["models"]["in_efficientnet_b8"]["timm"]["name"]
    assert b8 == "tf_efficientnet_b8.ra_in1k"  # never the default .ap_in1k
    assert registry["models"]["f_c100_resnet50_ce"]["preprocessing"] == "cifar100_focal"
    assert registry["models"]["f_c100_resnet50_ce"]["expected_acc"] == 76.70


def test_registry_architectures_exist(registry):
    from calbench.data.preprocessing import PRESETS

    seen = set()
    for m in registry["models"].values():
        assert m["preprocessing"] in PRESETS
        if m["source"] == "checkpoint" and (m["arch"], m["num_classes"]) not in seen:
            seen.add((m["arch"], m["num_classes"]))
            with torch.device("meta"):
                model = P.build_architecture(m["arch"], m["num_classes"])
            assert list(model.state_dict())[-1].endswith("bias")
    assert len(seen) == 13 + 9


def test_bad_registry_entries_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match="source 'hub' is not one of"):
        P.check_entry("x", {"dataset": "cifar10", "source": "hub", "num_classes": 10})
    with pytest.raises(ValueError, match="needs field"):
        P.check_entry("x", {"dataset": "cifar10", "source": "checkpoint", "num_classes": 10})
    with pytest.raises(ValueError, match="not a slug"):
        P.check_entry("Bad-Name", {})
    with pytest.raises(ValueError, match="did you mean"):
        P.get_entry({"models": {"c10_resnet18": {}}}, "c10_resnet19")
    with pytest.raises(ValueError, match="unknown architecture"):
        P.build_architecture("focal_resnet18", 10)
    with pytest.raises(FileNotFoundError, match="--config"):
        P.load_registry(tmp_path / "nope.yaml")


# ----------------------------------------------------------------- checkpoint source


def small_focal_entry(tmp_path, sha=None, **extra):
    return {
        "dataset": "cifar10",
        "source": "checkpoint",
        "arch": "focal_densenet121",
        "num_classes": 10,
        "checkpoint": {
            "filename": "densenet121_cross_entropy_350.model",
            "urls": [],
            "sha256": sha,
            "strip_prefix": "module.",
            **extra,
        },
    }


@pytest.fixture(scope="module")
def focal_file(tmp_path_factory):
    """A DataParallel-style checkpoint (every key prefixed with 'module.'), as the study's files."""
    torch.manual_seed(0)
    model = P.build_architecture("focal_densenet121", 10)
    with torch.no_grad():  # non-default BN statistics so that loading is observable
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    src = tmp_path_factory.mktemp("dl") / "densenet121_cross_entropy_350.model"
    torch.save({f"module.{k}": v for k, v in model.state_dict().items()}, src)
    return src, model.eval()


def test_focal_checkpoint_through_registry(tmp_path, focal_file):
    src, reference = focal_file
    entry = small_focal_entry(tmp_path, sha=sha256(src)[:16])
    res = tmp_path / "resources"
    dest = download_checkpoint("f_c10_densenet121_ce", entry, res, mirrors=[src.parent])
    assert dest == res / "checkpoints/cifar10/f_c10_densenet121_ce/checkpoint.pt"
    model = P.load_pretrained("f_c10_densenet121_ce", entry, resources=res)
    assert not model.training
    for k, v in reference.state_dict().items():
        torch.testing.assert_close(model.state_dict()[k], v)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(x), reference(x))


def test_without_strip_prefix_the_keys_do_not_fit(tmp_path, focal_file):
    src, _ = focal_file
    entry = small_focal_entry(tmp_path)
    entry["checkpoint"]["strip_prefix"] = None
    with pytest.raises(ValueError, match="missing key"):
        P.load_pretrained("m", entry, checkpoint=src)


def test_corrupted_file_fails_the_pinned_checksum(tmp_path, focal_file):
    src, _ = focal_file
    bad = tmp_path / "mirror" / src.name
    bad.parent.mkdir()
    data = bytearray(src.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    entry = small_focal_entry(tmp_path, sha=sha256(src))
    with pytest.raises(FileNotFoundError, match="does not match the pinned"):
        download_checkpoint("m", entry, tmp_path / "res", mirrors=[bad.parent])
    assert not P.checkpoint_path("m", entry, tmp_path / "res").exists()  # nothing partial
    with pytest.raises(ChecksumError):
        P.load_pretrained("m", entry, checkpoint=bad)


def test_unpinned_file_is_recorded_and_rechecked(tmp_path, focal_file):
    src, _ = focal_file
    entry = small_focal_entry(tmp_path)  # no published checksum
    res = tmp_path / "res"
    dest = download_checkpoint("m", entry, res, local_file=src)
    lock = json.loads((res / "checksums.lock").read_text())["files"]
    assert lock["checkpoints/cifar10/m/checkpoint.pt"]["sha256"] == sha256(src)
    P.load_pretrained("m", entry, resources=res)  # verifies against the record
    with open(dest, "r+b") as fh:  # the file changes after it was fetched
        fh.seek(100)
        fh.write(b"\x00\x01\x02")
    with pytest.raises(ChecksumError, match="recorded"):
        P.load_pretrained("m", entry, resources=res)


def test_url_download_path(tmp_path, focal_file):
    src, _ = focal_file
    entry = small_focal_entry(tmp_path, sha=sha256(src)[:8])
    entry["checkpoint"]["urls"] = ["http://127.0.0.1:9/nothing-here.model", src.as_uri()]
    dest = download_checkpoint("m", entry, tmp_path / "res")
    assert sha256(dest) == sha256(src)


def test_nothing_available_says_what_to_do(tmp_path):
    entry = small_focal_entry(tmp_path)
    with pytest.raises(FileNotFoundError, match="download it by hand into a mirror"):
        download_checkpoint("m", entry, tmp_path / "res", mirrors=[tmp_path])
    with pytest.raises(FileNotFoundError, match="download-checkpoint"):
        P.load_pretrained("m", entry, resources=tmp_path / "res")


def test_huyvnphan_zip_member(tmp_path):
    """The published zip holds state_dicts/<name>.pt; the member is extracted and loaded strictly."""
    torch.manual_seed(1)
    model = P.build_architecture("huyvnphan_mobilenet_v2", 10).eval()
    pt = tmp_path / "mobilenet_v2.pt"
    torch.save(model.state_dict(), pt)
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    with zipfile.ZipFile(mirror / "cifar10_weights.zip", "w") as zf:
        zf.write(pt, "state_dicts/mobilenet_v2.pt")
        zf.writestr("state_dicts/resnet18.pt", b"not used")
    entry = {
        "dataset": "cifar10",
        "source": "checkpoint",
        "arch": "huyvnphan_mobilenet_v2",
        "num_classes": 10,
        "checkpoint": {
            "filename": "cifar10_weights.zip",
            "archive_member": "state_dicts/mobilenet_v2.pt",
            "urls": ["http://127.0.0.1:9/dead-box-link.zip"],
            "sha256": None,
        },
    }
    res = tmp_path / "res"
    dest = download_checkpoint("c10_mobilenet_v2", entry, res, mirrors=[mirror])
    assert dest.name == "checkpoint.pt" and sha256(dest) == sha256(pt)
    assert (res / "archives" / "cifar10_weights.zip").is_file()
    loaded = P.load_pretrained("c10_mobilenet_v2", entry, resources=res)
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x))
    entry["checkpoint"]["archive_member"] = "state_dicts/vgg11_bn.pt"
    with pytest.raises(ValueError, match="no member"):
        download_checkpoint("c10_vgg11_bn", entry, res, mirrors=[mirror])


# ----------------------------------------------------------------- torch.hub source

HUBCONF = """
import torch.nn as nn

dependencies = ["torch"]


def cifar100_resnet20(pretrained=False, **kwargs):
    if pretrained:
        raise RuntimeError("the test hub must never download")
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 100))
"""


def test_torchhub_from_a_local_pinned_checkout(tmp_path):
    entry = {
        "dataset": "cifar100",
        "source": "torchhub",
        "num_classes": 100,
        "hub": {
            "repo": "chenyaofo/pytorch-cifar-models",
            "ref": "e8a3ffb2383c0be657199cd668d763b2233db91d",
            "entry": "cifar100_resnet20",
        },
        "checkpoint": {"filename": "cifar100_resnet20-00000000.pt", "urls": []},
    }
    res = tmp_path / "res"
    with pytest.raises(FileNotFoundError, match="git clone"):
        P.resolve_hub_dir(entry, res)
    code = res / "hub" / "chenyaofo_pytorch-cifar-models_e8a3ffb2383c0be657199cd668d763b2233db91d"
    code.mkdir(parents=True)
    (code / "hubconf.py").write_text(HUBCONF)
    torch.manual_seed(2)
    ref = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 100))
    src = tmp_path / "dl" / "weights.pt"
    src.parent.mkdir()
    torch.save(ref.state_dict(), src)
    entry["checkpoint"]["sha256"] = sha256(src)[:8]
    entry["checkpoint"]["filename"] = f"cifar100_resnet20-{sha256(src)[:8]}.pt"
    download_checkpoint("c100_resnet20", entry, res, local_file=src)
    model = P.load_pretrained("c100_resnet20", entry, resources=res)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref(x))


# ----------------------------------------------------------------- timm source


def test_timm_loads_a_verified_local_file(tmp_path):
    torch.manual_seed(3)
    src_model = P.build_timm("mobilenetv2_120d.ra_in1k", None).eval()
    f = tmp_path / "mobilenetv2_120d_ra-test.pth"
    torch.save(src_model.state_dict(), f)
    entry = {
        "dataset": "imagenet",
        "source": "timm",
        "num_classes": 1000,
        "timm": {"name": "mobilenetv2_120d.ra_in1k"},
        "checkpoint": {"filename": f.name, "urls": [], "sha256": sha256(f)[:8]},
    }
    model = P.load_pretrained("in_mobilenetv2_120d", entry, checkpoint=f)
    for k, v in src_model.state_dict().items():
        torch.testing.assert_close(model.state_dict()[k], v)


def test_timm_requires_a_tag():
    with pytest.raises(ValueError, match="no pretrained tag"):
        P.build_timm("tf_efficientnet_b8", None)


def test_source_interface_of_calbench_models(tmp_path, focal_file):
    from calbench.models import load_model

    src, reference = focal_file
    spec = small_focal_entry(tmp_path, sha=sha256(src)[:8])
    model = load_model(spec, checkpoint=src)
    torch.testing.assert_close(model.linear.weight, reference.linear.weight)
    with pytest.raises(ValueError, match="download-checkpoint"):
        load_model(spec)
