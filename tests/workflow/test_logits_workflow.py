"""Models from logits files through the real workflow (source: logits), on files made here.

Three sources in one config: two coursework models of config/coursework_logits.yaml served by a
local imitation of Yandex Disk's public API (the study split applies), a Kängsepp-format pickle
served by a local imitation of Git LFS (pre-split: its own validation and test parts), and a
user's .npz with predefined split indices read from a local path (nothing fetched). Checked: the
imported logits equal the files; each model's steps used its own split or the study split; the
replication tables compare with the published cells; a second run plans nothing; adding one
logits model plans only its chain plus aggregate, report and replication tables.
"""

from __future__ import annotations

import io
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from workflow_copy import job_counts, workflow_env

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "logits_sources"))
from fake_services import FakeServices  # noqa: E402

pytestmark = [pytest.mark.slow]

if shutil.which("snakemake") is None:  # pragma: no cover
    pytest.skip("snakemake is not installed", allow_module_level=True)

N = 200
CW_MODELS = ("c10_resnet18", "c10_vgg11_bn")
CALIBRATORS = ("uncalibrated", "ts", "hist")


def _env(root: Path) -> dict:
    env = workflow_env(root)
    return env


def smk(root: Path, *args) -> subprocess.CompletedProcess:
    cmd = ["snakemake", "--cores", "2", *map(str, args)]
    return subprocess.run(
        cmd, cwd=root, env=_env(root), capture_output=True, text=True, timeout=900
    )


def planned(root: Path, *args) -> dict[str, int]:
    res = smk(root, "-n", "--quiet", "rules", *args)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return job_counts(res.stdout + res.stderr)


def _pt(z) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(torch.from_numpy(z), buf)
    return buf.getvalue()


def _data(seed, n, k, sharp=3.0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k)).astype(np.float32)
    z[np.arange(n), y] += sharp
    return z, y


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    import hashlib

    base = tmp_path_factory.mktemp("lw")
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
    with FakeServices() as fake:
        fake.state.public_key = "https://disk.yandex.ru/d/9Awu1nwJOZv4Lg"
        files = {}
        _, y = _data(0, N, 10)
        for i, m in enumerate((*CW_MODELS, "c10_resnet34")):
            z, _ = _data(i + 1, N, 10)
            z[np.arange(N), y] += 2.0
            stem = m.split("_", 1)[1]
            fake.state.disk[f"/logits/cifar10/v1/{stem}.pt"] = _pt(z)  # the study's zip layout
            files[m] = z
        fake.state.disk["/logits/cifar10/targets.txt"] = "\n".join(map(str, y)).encode()
        files["labels"] = y
        zk, yk = _data(7, 150, 10)
        kull = pickle.dumps(
            [(zk[:60], yk[:60, None].astype(np.uint8)), (zk[60:], yk[60:, None].astype(np.int64))],
            protocol=3,
        )
        fake.state.lfs[hashlib.sha256(kull).hexdigest()] = kull
        zn, yn = _data(8, 120, 5)
        npz = base / "user" / "mine.npz"
        npz.parent.mkdir()
        np.savez(
            npz,
            logits=zn,
            labels=yn,
            val_idx=np.arange(0, 120, 3),
            test_idx=np.setdiff1d(np.arange(120), np.arange(0, 120, 3)),
        )
        files.update(kull=(zk, yk), npz=(zn, yn))

        cw = yaml.safe_load((REPO / "config" / "coursework_logits.yaml").read_text())
        cfg = {k: cw[k] for k in ("study", "evaluation", "compare", "plots", "report")}
        cfg["evaluation"] = {**cw["evaluation"], "n_bootstrap": 5}
        cfg["compare"] = {**cw["compare"], "n_bootstrap": 5}
        cfg["compare"]["select_exclude"] = [
            c for c in cw["compare"].get("select_exclude", []) if c in CALIBRATORS
        ]
        cfg["mirrors"] = []
        cfg["datasets"] = {
            "cifar10": cw["datasets"]["cifar10"],
            "c10_kull": {"display": "CIFAR-10 (Kängsepp)"},
            "mine": {"display": "Mine"},
        }
        cfg["calibrators"] = {c: cw["calibrators"][c] for c in CALIBRATORS}
        models = {m: json.loads(json.dumps(cw["models"][m])) for m in CW_MODELS}
        for v in models.values():
            v["logits"]["yandex_disk"]["api_base"] = fake.base
        models["kull_resnet110"] = {
            "dataset": "c10_kull",
            "source": "logits",
            "display": {"name": "ResNet-110 (Kängsepp)"},
            "logits": {
                "format": "kull_pickle",
                "file": "probs_resnet110_c10_logits.p",
                "sha256": hashlib.sha256(kull).hexdigest(),
                "size": len(kull),
                "github_lfs": {
                    "repo": "markus93/NN_calibration",
                    "ref": "5bb76132ebfd",
                    "path": "logits/probs_resnet110_c10_logits.p",
                    "media_base": fake.base + "/media",
                    "api_base": fake.base,
                },
            },
        }
        models["my_net"] = {
            "dataset": "mine",
            "source": "logits",
            "logits": {
                "format": "npz",
                "file": "mine.npz",
                "split": "file",
                "local_path": str(npz),
            },
        }
        cfg["models"] = models
        (root / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        res = smk(root)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        again = planned(root)
        # one more coursework model: only its chain, plus the tables and the report
        cfg["models"]["c10_resnet34"] = json.loads(json.dumps(cw["models"]["c10_resnet34"]))
        cfg["models"]["c10_resnet34"]["logits"]["yandex_disk"]["api_base"] = fake.base
        (root / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
        added = planned(root)
        log = list(fake.state.log)
    return {"root": root, "files": files, "again": again, "added": added, "log": log}


def test_imported_logits_equal_the_files(run):
    from calbench.logits import load_logits

    root, files = run["root"], run["files"]
    for m in CW_MODELS:
        d = load_logits(root / f"results/logits/cifar10/{m}.npz")
        np.testing.assert_array_equal(d["logits"], files[m])
        np.testing.assert_array_equal(d["labels"], files["labels"])
    d = load_logits(root / "results/logits/c10_kull/kull_resnet110.npz")
    np.testing.assert_array_equal(d["logits"], files["kull"][0])
    np.testing.assert_array_equal(d["labels"], files["kull"][1])
    d = load_logits(root / "results/logits/mine/my_net.npz")
    np.testing.assert_array_equal(d["labels"], files["npz"][1])
    # pinned on first use (no published checksum for the study's files)
    lock = json.loads((root / "resources/checksums.lock").read_text())["files"]
    assert set(lock) == {
        f"logits/cifar10/{m}/{f}"
        for m in CW_MODELS
        for f in (m.split("_", 1)[1] + ".pt", "targets.txt")
    }
    prov = json.loads((root / "results/logits/cifar10/c10_resnet18.source.json").read_text())
    assert prov["files"][0]["status"] == "pinned on first use"
    prov = json.loads((root / "results/logits/c10_kull/kull_resnet110.source.json").read_text())
    assert prov["files"][0]["status"] == "published checksum"
    assert (
        "GET",
        "/media/markus93/NN_calibration/5bb76132ebfd/logits/probs_resnet110_c10_logits.p",
    ) in run["log"]


def test_each_model_uses_its_split(run):
    from calbench.split import study_split

    root = run["root"]
    with np.load(root / "results/split/cifar10/split.npz") as s:
        val, test = study_split(N)
        np.testing.assert_array_equal(s["val_idx"], val)
        np.testing.assert_array_equal(s["test_idx"], test)
    with np.load(root / "results/split/c10_kull/kull_resnet110.npz") as s:
        assert s["val_idx"].tolist() == list(range(60))
        assert s["test_idx"].tolist() == list(range(60, 150))
    assert not (root / "results/split/c10_kull/split.npz").exists()
    with np.load(root / "results/split/mine/my_net.npz") as s:
        assert s["val_idx"].tolist() == list(range(0, 120, 3))
    # the uncalibrated accuracy of each half is computed on the right rows
    import csv

    zk, yk = run["files"]["kull"]
    with open(root / "results/metrics/c10_kull/kull_resnet110/uncalibrated.csv") as fh:
        rows = {(r["half"], r["metric"]): float(r["value"]) for r in csv.DictReader(fh)}
    assert rows[("val", "accuracy")] == pytest.approx(np.mean(zk[:60].argmax(1) == yk[:60]))
    assert rows[("test", "accuracy")] == pytest.approx(np.mean(zk[60:].argmax(1) == yk[60:]))
    report = (root / "reports/report.html").read_text()
    assert "results/split/c10_kull/kull_resnet110.npz" in report
    assert "Imported from" in report and "pinned on first use" in report
    assert (
        "kull_pickle: probs_resnet110_c10_logits.p sha256" in report
        and "published checksum" in report
    )


def test_replication_tables_compare_with_published(run):
    import csv

    root = run["root"]
    with open(root / "results/replication/cells.csv") as fh:
        cells = list(csv.DictReader(fh))
    cw_cells = [c for c in cells if c["model"] in CW_MODELS]
    assert len(cw_cells) == len(CW_MODELS) * len(CALIBRATORS) * 6
    assert all(c["published"] not in ("", None) for c in cw_cells)


def test_rerun_plans_nothing_and_adding_a_model_plans_its_chain(run):
    assert run["again"] == {}
    want = {
        "import_logits": 1,
        "calibrate": 1,
        "aggregate": 1,
        "render_report": 1,
        "replication_tables": 1,
        "all": 1,
    }
    assert run["added"] == want
