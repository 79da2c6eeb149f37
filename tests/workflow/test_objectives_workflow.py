"""The calibration-during-training studies through the real Snakemake workflow, tiny versions.

Each study config (config/objectives_fmnist.yaml, metacal_fmnist.yaml, softcal_fmnist.yaml) is
shrunk to two objectives x two seeds of the MLP, a few hundred images and two epochs, copied
into a private workflow folder as its config.yaml and run to the report. Checked: the config
validates against the schema, the trained models carry per-epoch validation ECE / DECE in
history.csv, and the report holds the study's sections with mean ± std over the seeds.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow]

if shutil.which("snakemake") is None:  # pragma: no cover
    pytest.skip("snakemake is not installed (pip install -e .[workflow])", allow_module_level=True)
if not Path(
    "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"
).is_file():  # pragma: no cover
    pytest.skip("Debian package dataset-fashion-mnist is not installed", allow_module_level=True)


def tiny(cfg: dict, objectives: list[str], calibrators: list[str]) -> dict:
    """The study config shrunk: MLP models of ``objectives`` (display.loss) with seeds 0 and 1."""
    models = {}
    for m, v in cfg["models"].items():
        d = v["display"]
        if v["arch"] == "mlp" and d["loss"] in objectives and d["seed"] in (0, 1):
            t = dict(v["training"])
            t.update(epochs=2, train_subset=300, batch_size=64)
            if t.get("val_size"):
                t["val_size"] = 200
            if t.get("milestones"):
                t["milestones"] = [1]
            models[m] = {**v, "training": t}
    assert len(models) == 2 * len(objectives), sorted(models)
    cfg = dict(cfg)
    cfg["models"] = models
    cfg["datasets"] = {"fashion_mnist": {**cfg["datasets"]["fashion_mnist"], "limit": 400}}
    cfg["calibrators"] = {c: cfg["calibrators"][c] for c in calibrators}
    cfg["evaluation"] = {**cfg["evaluation"], "n_bootstrap": 10, "halves": ["test"]}
    cfg["compare"] = {**cfg["compare"], "n_bootstrap": 10, "baselines": ["uncalibrated"]}
    return cfg


def run_study(tmp_path: Path, config: str, objectives, calibrators) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy2(REPO / "Snakefile", root / "Snakefile")
    for sub in ("workflow", "profiles/default", "envs"):
        shutil.copytree(REPO / sub, root / sub, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(
        REPO / "src" / "calbench",
        root / "lib" / "calbench",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    cfg = tiny(yaml.safe_load((REPO / "config" / config).read_text()), objectives, calibrators)
    (root / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "lib"), env.get("PYTHONPATH", "")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    t0 = time.perf_counter()
    cmd = ["snakemake", "--cores", "2", "reports/report.html"]
    res = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise AssertionError(f"{config} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    print(f"{config}: {time.perf_counter() - t0:.1f} s")
    return root


def _history(root: Path, model: str) -> list[dict]:
    with open(root / "results" / "models" / "fashion_mnist" / model / "history.csv") as fh:
        return list(csv.DictReader(fh))


def test_objectives_study(tmp_path):
    root = run_study(tmp_path, "objectives_fmnist.yaml", ["CE", "FL 3"], ["uncalibrated", "ts"])
    html = (root / "reports" / "report.html").read_text()
    assert "Calibration by training loss" in html
    md = (root / "results" / "tables" / "losses_ece.md").read_text()
    assert "| CE | FL 3 |" in md and md.count("±") == 2  # two objectives, mean ± std of 2 seeds
    h = _history(root, "fmnist_mlp_ce_s0")
    assert len(h) == 2 and 0 <= float(h[-1]["val_ece"]) <= 1 and float(h[-1]["val_dece"]) >= 0
    assert "DECE against ECE over training" in html
    assert "Reliability diagrams per objective" in html


def test_metacal_study(tmp_path):
    root = run_study(
        tmp_path, "metacal_fmnist.yaml", ["CE (M0)", "Meta-Cal"], ["uncalibrated", "ts"]
    )
    html = (root / "reports" / "report.html").read_text()
    assert 'data-key="metacal_main"' in html and "ECE after TS" in html
    h = _history(root, "fmnist_mlp_metacal_s1")
    assert float(h[-1]["omega_abs_mean"]) > 0 and float(h[-1]["meta_loss"]) >= 0
    assert float(h[-1]["lr"]) == pytest.approx(0.005)  # x0.1 after the milestone
    assert html.count(" ± ") >= 6  # mean ± std cells of both objectives


def test_softcal_study(tmp_path):
    root = run_study(
        tmp_path,
        "softcal_fmnist.yaml",
        ["NLL", "NLL / SB-ECE interleaved"],
        ["uncalibrated", "ts", "ts_sbece"],
    )
    html = (root / "reports" / "report.html").read_text()
    for key in ("softcal_main", "softcal_ts", "softcal_appendix"):
        assert f'data-key="{key}"' in html
    assert "TS-SB-ECE: ECE l2 mass" in html
