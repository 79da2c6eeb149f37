"""The coursework replication through the real workflow, on files the test makes.

Nothing of the study can be downloaded here, so the test builds what the downloads would give:
a CIFAR-10-format test batch of 200 images in a ``cifar-10-python.tar.gz`` (with its own MD5s,
set through the dataset's config entry), a huyvnphan-style weights zip holding a real
``state_dicts/mobilenet_v2.pt`` and a focal_calibration ``.model`` file (``module.`` keys) of a
real ResNet-110, both saved from the package architectures with random weights. The config is
the coursework registry's two entries with ``file://`` URLs and the test's checksums. Checked:
a corrupted checkpoint fails its download rule with the checksum message and leaves no file;
then a full run to the report and the replication tables: checkpoints verified and in place,
logits equal to the models run by hand with each entry's preprocessing preset, the reference
comparison carrying the packaged published values, and the accuracy check.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import pickle
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from workflow_copy import workflow_env

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow]

if shutil.which("snakemake") is None:  # pragma: no cover
    pytest.skip("snakemake is not installed", allow_module_level=True)

MODELS = ("c10_mobilenet_v2", "f_c10_resnet110_ce")
CALIBRATORS = ("uncalibrated", "hist", "ts", "ms_b")
N = 200


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _env(root: Path) -> dict:
    env = workflow_env(root)
    return env


def smk(root: Path, *args) -> subprocess.CompletedProcess:
    cmd = ["snakemake", "--cores", "2", *map(str, args)]
    return subprocess.run(
        cmd, cwd=root, env=_env(root), capture_output=True, text=True, timeout=600
    )


def _make_files(src: Path) -> dict:
    """The test's stand-ins for the downloads; returns their paths and digests."""
    import torch

    from calbench.models import pretrained as P

    src.mkdir(parents=True)
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, size=(N, 3 * 32 * 32), dtype=np.uint8)
    torch.manual_seed(0)

    def calibrate_bn(net):  # running statistics of real activations: outputs depend on inputs
        net.train()
        with torch.no_grad():
            for _ in range(2):
                net(torch.randn(16, 3, 32, 32))
        return net.eval()

    mobilenet = calibrate_bn(P.build_architecture("huyvnphan_mobilenet_v2", 10))
    buf = io.BytesIO()
    torch.save(mobilenet.state_dict(), buf)
    weights_zip = src / "cifar10_weights.zip"
    with zipfile.ZipFile(weights_zip, "w") as zf:
        zf.writestr("state_dicts/mobilenet_v2.pt", buf.getvalue())
    resnet = calibrate_bn(P.build_architecture("focal_resnet110", 10))
    focal = src / "resnet110_cross_entropy_350.model"
    torch.save({"module." + k: v for k, v in resnet.state_dict().items()}, focal)
    # Labels that the random-weight models predict better than chance (temperature scaling then
    # fits a positive temperature, as for any real model; calibrators refuse T <= 0 on load):
    # 70% follow the ResNet-110's prediction, the rest the MobileNetV2's (whose outputs barely
    # depend on the input, so its prediction is nearly one class).
    images = data.reshape(N, 3, 32, 32)
    with torch.no_grad():
        pred_res = resnet(torch.from_numpy(_normalise(images, "cifar10_focal"))).argmax(1).numpy()
        pred_mob = mobilenet(torch.from_numpy(_normalise(images, "cifar10_huy"))).argmax(1).numpy()
    labels = np.where(rng.random(N) < 0.7, pred_res, pred_mob).astype(int).tolist()
    batch_dir = src / "build" / "cifar-10-batches-py"
    batch_dir.mkdir(parents=True)
    with open(batch_dir / "test_batch", "wb") as fh:
        pickle.dump({"data": data, "labels": labels}, fh)
    archive = src / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(batch_dir, arcname="cifar-10-batches-py")
    return {
        "images": data.reshape(N, 3, 32, 32),
        "labels": np.asarray(labels),
        "archive": archive,
        "archive_md5": hashlib.md5(archive.read_bytes()).hexdigest(),
        "test_md5": hashlib.md5((batch_dir / "test_batch").read_bytes()).hexdigest(),
        "zip": weights_zip,
        "focal": focal,
        "focal_sha256": _sha256(focal),
        "member": buf.getvalue(),
    }


def _config(files: dict) -> dict:
    cw = yaml.safe_load((REPO / "config" / "coursework.yaml").read_text())
    models = {m: cw["models"][m] for m in MODELS}
    models["c10_mobilenet_v2"]["checkpoint"]["urls"] = [files["zip"].as_uri()]
    models["f_c10_resnet110_ce"]["checkpoint"].update(
        urls=[files["focal"].as_uri()], sha256=files["focal_sha256"]
    )
    cfg = {k: cw[k] for k in ("study", "evaluation", "compare", "plots", "report")}
    cfg["evaluation"] = {**cw["evaluation"], "n_bootstrap": 5, "halves": ["test", "val"]}
    cfg["compare"] = {**cw["compare"], "n_bootstrap": 5}
    cfg["mirrors"] = []
    cfg["datasets"] = {
        "cifar10": {
            **cw["datasets"]["cifar10"],
            "urls": [files["archive"].as_uri()],
            "md5": files["archive_md5"],
            "test_md5": files["test_md5"],
        }
    }
    cfg["models"] = models
    cfg["calibrators"] = {c: cw["calibrators"][c] for c in CALIBRATORS}
    return cfg


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("cw")
    root = base / "repo"
    root.mkdir()
    shutil.copy2(REPO / "Snakefile", root / "Snakefile")
    for sub in ("workflow", "envs"):
        shutil.copytree(REPO / sub, root / sub, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(
        REPO / "src" / "calbench",
        root / "lib" / "calbench",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    files = _make_files(base / "downloads")
    (root / "config.yaml").write_text(yaml.safe_dump(_config(files), sort_keys=False))

    # a corrupted download: the rule fails with the checksum message and leaves no file
    good = files["focal"].read_bytes()
    files["focal"].write_bytes(good[:-100] + b"x" * 100)
    target = "resources/checkpoints/cifar10/f_c10_resnet110_ce/checkpoint.pt"
    bad = smk(root, target)
    files["focal"].write_bytes(good)
    log = (root / "logs/download_checkpoint/cifar10/f_c10_resnet110_ce.log").read_text()

    res = smk(root, "replication")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return {"root": root, "files": files, "bad": bad, "bad_log": log, "target": target}


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_corrupt_checkpoint_fails_with_the_checksum_message(run):
    assert run["bad"].returncode != 0
    assert "does not match the pinned" in run["bad_log"]
    assert run["files"]["focal_sha256"][:12] in run["bad_log"]


def test_checkpoints_verified_and_in_place(run):
    root, files = run["root"], run["files"]
    focal = root / run["target"]
    assert _sha256(focal) == files["focal_sha256"]
    mobile = root / "resources/checkpoints/cifar10/c10_mobilenet_v2/checkpoint.pt"
    assert mobile.read_bytes() == files["member"]  # the zip member, extracted
    # no checksum is published for the zip: its digest and size were pinned when first fetched
    pins = json.loads((root / "resources/checksums.lock").read_text())["files"]
    zip_pin = pins["archives/cifar10_weights.zip"]
    assert zip_pin["sha256"] == _sha256(files["zip"])
    assert zip_pin["size"] == files["zip"].stat().st_size
    manifest = json.loads((root / "resources/datasets/cifar10/manifest.json").read_text())
    assert manifest["splits"]["test"]["n"] == N and manifest["test_md5"] == files["test_md5"]


def _normalise(images: np.ndarray, preset: str) -> np.ndarray:
    from calbench.data.preprocessing import PRESETS

    p = PRESETS[preset]
    mean = np.asarray(p["mean"], dtype=np.float32).reshape(1, 3, 1, 1)
    std = np.asarray(p["std"], dtype=np.float32).reshape(1, 3, 1, 1)
    return ((images.astype(np.float32) / 255.0 - mean) / std).astype(np.float32)


@pytest.mark.parametrize("model", MODELS)
def test_logits_use_each_models_preprocessing(run, model):
    import torch

    from calbench.models import pretrained as P

    root, files = run["root"], run["files"]
    entry = yaml.safe_load((root / "config.yaml").read_text())["models"][model]
    z = np.load(root / f"results/logits/cifar10/{model}.npz")
    assert z["logits"].shape == (N, 10) and np.array_equal(z["labels"], files["labels"])
    net = P.build_architecture(entry["arch"], 10)
    net.load_state_dict(
        P.read_state_dict(
            root / f"resources/checkpoints/cifar10/{model}/checkpoint.pt",
            prefix=entry["checkpoint"].get("strip_prefix"),
        )
    )
    net.eval()
    with torch.inference_mode():
        want = net(torch.from_numpy(_normalise(files["images"], entry["preprocessing"]))).numpy()
        other = "cifar10_focal" if entry["preprocessing"] == "cifar10_huy" else "cifar10_huy"
        wrong = net(torch.from_numpy(_normalise(files["images"], other))).numpy()
    np.testing.assert_allclose(z["logits"], want, rtol=1e-4, atol=1e-5)
    # the other preset gives measurably different logits (the random-weight MobileNetV2's
    # outputs barely depend on its input, so only the ResNet-110 can tell the presets apart)
    if model == "f_c10_resnet110_ce":
        assert np.abs(z["logits"] - wrong).max() > 10 * np.abs(z["logits"] - want).max() + 1e-7


def test_reference_comparison_carries_the_published_values(run):
    from calbench.reference import load_reference

    root = run["root"]
    published = {
        (r["calbench_model"], r["method"], r["metric"]): r["value"]
        for r in load_reference("coursework_2021")
        if r["table"].startswith("metrics_")
    }
    ref = _rows(root / "results/tables/reference.csv")
    assert {"ours", "theirs", "difference", "tolerance", "within"} <= set(ref[0])
    names = {
        "uncalibrated": "Uncalibrated",
        "hist": "Hist-binning",
        "ts": "T-scaling",
        "ms_b": "M-scaling-b",
    }
    metrics = {"accuracy": "ACC", "ece": "ECE", "nll": "NLL", "brier": "BS"}
    checked = 0
    for r in ref:
        if r["metric"] in metrics:
            scale = 100.0 if r["metric"] in ("accuracy", "ece") else 1.0
            want = published[(r["model"], names[r["method"]], metrics[r["metric"]])]
            assert float(r["theirs"]) == pytest.approx(want / scale)
            checked += 1
    assert checked == len(MODELS) * len(CALIBRATORS) * 4
    cells = _rows(root / "results/replication/cells.csv")
    assert len(cells) == len(MODELS) * len(CALIBRATORS) * 6
    c = next(
        r
        for r in cells
        if (r["model"], r["method"], r["metric"]) == ("f_c10_resnet110_ce", "ts", "ece")
    )
    assert float(c["published"]) == pytest.approx(
        published[("f_c10_resnet110_ce", "T-scaling", "ECE")] / 100
    )
    # random weights are nowhere near the study's numbers: flagged, but M-scaling-b is "expected"
    assert c["status"] == "differs"
    assert {r["status"] for r in cells if r["method"] == "ms_b"} <= {"expected to differ", "ok"}
    html = (root / "results/replication/replication.html").read_text()
    assert "M-scaling-b is expected to differ" in html and "Tolerances: accuracy 0.10" in html
    assert "group 1" in html and "group 2" in html


def test_accuracy_check_against_expected_acc(run):
    root = run["root"]
    rows = {r["model"]: r for r in _rows(root / "results/replication/accuracy_check.csv")}
    assert set(rows) == set(MODELS)
    z = np.load(root / "results/logits/cifar10/c10_mobilenet_v2.npz")
    acc = 100 * float((z["logits"].argmax(1) == z["labels"]).mean())
    assert float(rows["c10_mobilenet_v2"]["ours"]) == pytest.approx(acc)
    assert float(rows["c10_mobilenet_v2"]["expected"]) == 93.91  # the registry's expected_acc
    assert rows["c10_mobilenet_v2"]["status"] == "differs"  # random weights
