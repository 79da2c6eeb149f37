"""The dataset-shift stage end to end on the tiny shift configuration (config/test_shift.yaml:
two one-epoch MLPs on 400 Fashion-MNIST test images, three generated corruptions), via
Snakemake in a private copy of the workflow and the library."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil

import numpy as np
import pytest
from test_workflow import REPO, planned, smk

from workflow_copy import copy_workflow

pytestmark = [pytest.mark.slow]

if shutil.which("snakemake") is None:  # pragma: no cover
    pytest.skip("snakemake is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = copy_workflow(tmp_path_factory.mktemp("shiftwf") / "repo")
    shutil.copy2(REPO / "config" / "test_shift.yaml", root / "config.yaml")
    smk(root, timeout=2400)  # a loaded 2-core machine: minutes
    return root


def _read(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_shift_outputs(run):
    import yaml

    cfg = yaml.safe_load((run / "config.yaml").read_text())
    corr, models, cals = cfg["shift"]["corruptions"], list(cfg["models"]), list(cfg["calibrators"])
    for c in corr:
        npy = run / "resources" / "corrupted" / "fashion_mnist" / f"{c}.npy"
        man = json.loads(npy.with_suffix(".json").read_text())
        assert man["sha256"] == hashlib.sha256(npy.read_bytes()).hexdigest()
        assert np.load(npy).shape == (5 * 400, 28, 28, 1) and man["seed"] == 0
    for m in models:
        z = np.load(run / "results" / "shift" / "fashion_mnist" / m / "logits.npz")
        split = np.load(run / "results" / "split" / "fashion_mnist" / "split.npz")
        assert z["logits"].shape == (len(corr), 5, 200, 10)
        assert np.array_equal(z["test_idx"], split["test_idx"])  # the clean test half
    rows = _read(run / "results" / "shift" / "metrics.csv")
    n_metrics = len(cfg["shift"]["metrics"])
    assert len(rows) == len(models) * len(cals) * n_metrics * (2 + 5 * len(corr))
    table = _read(run / "results" / "shift" / "mean_ece.csv")
    assert [r["method"] for r in table] == cals
    html = (run / "reports" / "report.html").read_text()
    assert 'id="shift"' in html and "Calibration under dataset shift" in html
    # the table, findings and comparisons use the unbiased ECE; "best" is cross-fitted
    assert "mean Unbiased ECE, % (l2, 15 bins), by severity" in html
    assert "cross-fitting inside the clean validation half" in html
    comp = _read(run / "results" / "shift" / "compare.csv")
    assert {r["metric"] for r in comp} == {"ece_ub", "nll"}
    assert all(0 <= float(r["p_value"]) <= 1 for r in comp)
    assert all(r["ci_low"] == "" for r in comp if r["metric"] == "ece_ub")
    # a finished run plans nothing
    assert planned(run) == {}


def test_corrupted_sets_are_reproducible(run, tmp_path):
    """Generating a corrupted set again gives byte-identical files (the manifest's sha256)."""
    npy = run / "resources" / "corrupted" / "fashion_mnist" / "rotation.npy"
    before = npy.read_bytes()
    smk(run, "--forcerun", "corrupt_dataset", "--until", "corrupt_dataset", timeout=1200)
    assert npy.read_bytes() == before


def test_cifar10_c_config_plans(tmp_path):
    """config/shift_cifar10.yaml (the coursework's CIFAR-10 zoo on CIFAR-10-C) validates and
    plans: one archive, 15 extracted corruptions, one shift-logits and evaluate-shift job per
    model."""
    import yaml

    root = copy_workflow(tmp_path / "repo")
    cfg = yaml.safe_load((REPO / "config" / "shift_cifar10.yaml").read_text())
    n_models = len(cfg["models"])
    assert n_models == 33 and cfg["shift"]["source"] == "published"
    counts = planned(root, "--configfile", "config/shift_cifar10.yaml")
    assert counts["download_corrupted"] == 1
    assert counts["corrupt_dataset"] == len(cfg["shift"]["corruptions"]) == 15
    assert counts["shift_logits"] == counts["evaluate_shift"] == n_models
    assert counts["shift_report"] == 1
