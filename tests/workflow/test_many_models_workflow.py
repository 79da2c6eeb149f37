"""A study of 80 models through the real workflow: every test over models works for any number
of models (the robustness section's signed-rank test refused more than 20). The models are
``source: logits`` .npz files of synthetic over-confident logits written here (small N, three
classes, two calibrators that need no torch: the calibrate job's start-up then costs about 1.7
CPU-seconds instead of 3.5), so the run costs the workflow's per-model fixed cost only."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from workflow_copy import copy_workflow, workflow_env

pytestmark = [pytest.mark.slow]

if shutil.which("snakemake") is None:  # pragma: no cover
    pytest.skip("snakemake is not installed", allow_module_level=True)

#: the coursework's scale (77 models), well past the 20 the old exact enumeration allowed
N_MODELS = 80
N, K = 300, 3


def _env(root: Path) -> dict:
    env = workflow_env(root)
    return env


def _logits(seed: int, y: np.ndarray) -> np.ndarray:
    """Over-confident logits of ``y``: temperature scaling lowers their calibration error."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(y.shape[0], K))
    z[np.arange(y.shape[0]), y] += 1.5
    return (4.0 * z).astype(np.float32)


def test_a_study_of_80_models_renders(tmp_path):
    root = copy_workflow(tmp_path / "repo", config=None)
    y = np.random.default_rng(0).integers(0, K, N)
    models = {}
    for i in range(N_MODELS):
        path = tmp_path / "logits" / f"net{i:02d}.npz"
        path.parent.mkdir(exist_ok=True)
        np.savez(path, logits=_logits(i + 1, y), labels=y)
        models[f"net{i:02d}"] = {
            "dataset": "synth",
            "source": "logits",
            "display": {"name": f"Net {i}"},
            "logits": {"format": "npz", "file": path.name, "local_path": str(path)},
        }
    cfg = {
        "study": {"title": "Many models", "description": "More than 20 models."},
        "datasets": {"synth": {"display": "Synthetic"}},
        "models": models,
        "calibrators": {"uncalibrated": {"display": "Uncalibrated"}, "iso": {"display": "Isotonic"}},
        "evaluation": {
            "metrics": ["accuracy", "ece_ub"],
            "halves": ["test"],
            "n_bootstrap": 5,
            "level": 0.95,
            "seed": 0,
        },
        "compare": {"baselines": ["uncalibrated"], "metrics": ["ece_ub"], "n_bootstrap": 5},
        "plots": {"n_bins": 10, "style": "guo"},
        "report": {"table_metrics": ["accuracy", "ece_ub"], "losses_metrics": ["ece_ub"]},
    }
    (root / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    res = subprocess.run(
        ["snakemake", "--cores", "2"],
        cwd=root,
        env=_env(root),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    report = (root / "reports" / "report.html").read_text()
    assert f"exact signed-rank test over {N_MODELS} models" in report
    assert f"Net {N_MODELS - 1}" in report
