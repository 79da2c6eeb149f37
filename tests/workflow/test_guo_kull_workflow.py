"""The Guo et al. 2017 / Kull et al. 2019 study through the real workflow, on pickles the test makes.

The Kängsepp pickles cannot be fetched here, so the test writes three small files in their exact
format (``pickle.dump([(logits_val, y_val), (logits_test, y_test)])``, float32 logits, labels of
shape ``(n, 1)`` in the files' varying dtypes: uint8 / int64 for ResNet-110 on CIFAR-10), places
them in a local folder (``logits.local_path``: nothing is fetched) and runs the entries of
config/guo_kull_logits.yaml with the test's checksums to the study's outputs. Checked against
computations by hand on the pickles: the workflow used each file's own validation and test parts
(log-loss, error and Brier / K of the test part in the comparison cells; accuracy and average
confidence of both parts in the summary table), the temperature sweep's ECE, and the HTML page.
"""

from __future__ import annotations

import csv
import hashlib
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow]

if shutil.which("snakemake") is None:  # pragma: no cover
    pytest.skip("snakemake is not installed", allow_module_level=True)

#: model -> (classes, n_val, n_test, validation label dtype)
MODELS = {
    "c10_resnet110": (10, 150, 200, np.uint8),
    "c100_densenet40": (100, 150, 200, np.int64),
    "svhn_resnet152_sd": (10, 120, 180, np.int64),
}
CALIBRATORS = ("uncalibrated", "hist", "iso", "ts", "vs", "dir_odir")


def _env(root: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "lib"), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["OMP_NUM_THREADS"] = "1"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _pickles(folder: Path, cfg: dict) -> dict:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    parts = {}
    for i, (model, (k, n_val, n_test, vdtype)) in enumerate(MODELS.items()):
        n = n_val + n_test
        y = rng.integers(0, k, size=n)
        # overconfident: a large margin for the true class on 70 % of rows, noise elsewhere
        z = rng.normal(size=(n, k)) * 2.0
        z[np.arange(n), y] += np.where(rng.random(n) < 0.7, 6.0, 0.0)
        z = z.astype(np.float32)
        zv, zt = z[:n_val], z[n_val:]
        yv = y[:n_val].reshape(-1, 1).astype(vdtype)
        yt = y[n_val:].reshape(-1, 1).astype(np.int64)
        path = folder / cfg["models"][model]["logits"]["file"]
        with open(path, "wb") as fh:
            pickle.dump([(zv, yv), (zt, yt)], fh, protocol=3)
        parts[model] = {"val": (zv, y[:n_val]), "test": (zt, y[n_val:]), "path": path, "seed": i}
    return parts


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("gk")
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
    full = yaml.safe_load((REPO / "config" / "guo_kull_logits.yaml").read_text())
    folder = base / "downloaded"
    parts = _pickles(folder, full)
    cfg = {k: full[k] for k in ("study", "evaluation", "compare", "plots", "report")}
    cfg["mirrors"] = []
    cfg["evaluation"] = {**full["evaluation"], "n_bootstrap": 5}
    cfg["compare"] = {**full["compare"], "n_bootstrap": 5}
    cfg["datasets"] = {d: full["datasets"][d] for d in ("cifar10", "cifar100", "svhn")}
    cfg["models"] = {}
    for m, p in parts.items():
        entry = full["models"][m]
        data = p["path"].read_bytes()
        entry["logits"].update(
            sha256=hashlib.sha256(data).hexdigest(), size=len(data), local_path=str(folder)
        )
        cfg["models"][m] = entry
    cfg["calibrators"] = {c: full["calibrators"][c] for c in CALIBRATORS}
    g = cfg["report"]["guo_kull"]
    g["summary_calibrators"] = ["uncalibrated", "ts", "iso"]
    g["expected_to_differ"] = ["dir_odir"]
    g["curve"] = {"start": 0.5, "stop": 2.5, "num": 5}
    (root / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    res = subprocess.run(
        ["snakemake", "--cores", "2", "replication"],
        cwd=root,
        env=_env(root),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return {"root": root, "parts": parts}


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _softmax(z):
    z = z.astype(np.float64)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_cells_use_each_files_own_test_part(run):
    cells = _rows(run["root"] / "results/guo_kull/cells.csv")
    by = {
        (c["source"], c["table"], c["model"], c["published_method"], c["published_metric"]): c
        for c in cells
    }
    for model in ("c10_resnet110", "c100_densenet40"):
        zt, yt = run["parts"][model]["test"]
        p = _softmax(zt)
        k = p.shape[1]
        q = np.clip(p, 1e-15, 1 - 1e-15)
        q /= q.sum(axis=1, keepdims=True)
        nll = -np.mean(np.log(q[np.arange(len(yt)), yt]))
        error = np.mean(p.argmax(1) != yt)
        brier_k = np.mean(((p - np.eye(k)[yt]) ** 2).sum(axis=1)) / k
        full = ("kull19_nb", "full_precision", model, "Uncal")
        assert float(by[(*full, "logloss")]["ours"]) == pytest.approx(nll, abs=1e-6)
        assert float(by[(*full, "error_pct")]["ours"]) == pytest.approx(error, abs=1e-12)
        assert float(by[(*full, "brier_div_k")]["ours"]) == pytest.approx(brier_k, abs=1e-9)
        # random logits are far from Kull et al.'s values: flagged, with a difference
        assert by[(*full, "logloss")]["status"] == "differs"
        guo = by[("guo17_S2", "S2", model, "uncal", "error_pct")]
        assert guo["status"] == "reference band"
    statuses = {c["status"] for c in cells}
    assert "no published logits" in statuses  # e.g. ImageNet rows: not in this run's config


def test_summary_table_on_both_parts(run):
    rows = _rows(run["root"] / "results/guo_kull/summary.csv")
    assert [(r["half"], r["method"]) for r in rows] == [
        (h, m) for h in ("val", "test") for m in ("uncalibrated", "ts", "iso")
    ]
    for r in rows:
        if r["method"] == "uncalibrated":
            z, y = run["parts"]["c100_densenet40"][r["half"]]
            p = _softmax(z)
            assert float(r["accuracy"]) == pytest.approx(np.mean(p.argmax(1) == y))
            assert float(r["confidence"]) == pytest.approx(p.max(1).mean(), abs=1e-6)
    ts = {r["half"]: r for r in rows if r["method"] == "ts"}
    unc = {r["half"]: r for r in rows if r["method"] == "uncalibrated"}
    assert ts["test"]["accuracy"] == unc["test"]["accuracy"]  # TS keeps the argmax


def test_temperature_sweep(run):
    from calbench.metrics import ece

    root = run["root"]
    for model, p in run["parts"].items():
        d = (
            root
            / "results/guo_kull/sweep"
            / {"c10": "cifar10", "c100": "cifar100"}.get(model.split("_")[0], "svhn")
            / model
        )
        rows = _rows(d / "sweep.csv")
        zt, yt = p["test"]
        for r in rows:
            if r["kind"] == "diagram":
                t = float(r["temperature"])
                assert float(r["ece"]) == pytest.approx(
                    ece(_softmax(zt.astype(np.float64) / t), yt, 15), abs=1e-9
                )
        assert [float(r["temperature"]) for r in rows if r["kind"] == "diagram"] == [
            0.5,
            1.0,
            1.5,
            2.0,
        ]
        assert sum(r["kind"] == "curve" for r in rows) == 5
        assert sum(r["kind"] == "fitted" for r in rows) == 1
        for name in ("reliability.png", "ece_vs_temperature.png"):
            assert (d / name).read_bytes().startswith(b"\x89PNG")


def test_html_page(run):
    page = (run["root"] / "results/guo_kull/guo_kull.html").read_text()
    assert page.count("data:image/png;base64,") == 2 * len(MODELS)
    for title in ("Table 1", "Table S2", "Table S3", "Table 3", "Table 4", "full-precision"):
        assert title in page
    assert "reference band" in page.lower()
    md = (run["root"] / "results/guo_kull/tables.md").read_text()
    assert "| Model | T = 0.5 | T = 1 | T = 1.5 | T = 2 |" in md
