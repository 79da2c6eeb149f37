"""A calibrate job pays only for the libraries its calibrators use: one whose calibrators are all
numpy/scipy never imports torch (about 2 s and 650 MB of a small job's start-up)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from calbench.split import save_split, study_split

PROBE = """
import sys
from calbench.cli import main
rc = main(sys.argv[1:])
print("RC", rc, "TORCH", "torch" in sys.modules)
"""


def _job(tmp_path, calibrators):
    rng = np.random.default_rng(0)
    n, k = 300, 4
    y = rng.integers(0, k, n)
    z = rng.normal(size=(n, k)).astype(np.float32)
    z[np.arange(n), y] += 2.0
    np.savez(tmp_path / "l.npz", logits=z, labels=y, order_hash="h", model="m", dataset="d")
    save_split(tmp_path / "s.npz", *study_split(n))
    spec = {
        "calibrators": {c: {"method": c, "params": {}, "display": c} for c in calibrators},
        "evaluation": {"metrics": ["accuracy", "ece", "nll"], "halves": ["test", "val"],
                       "n_bootstrap": 10, "level": 0.9, "seed": 0, "ci_halves": None,
                       "ci_metrics": None},
        "compare": {"metrics": ["ece_ub"], "baselines": [calibrators[0]], "n_bootstrap": 10,
                    "select_folds": 3, "select_exclude": []},
        "plots": {"n_bins": 10, "style": "guo"},
    }  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out = tmp_path / "out"
    args = ["calibrate", "--logits", tmp_path / "l.npz", "--split", tmp_path / "s.npz",
            "--spec", f"@{tmp_path / 'spec.json'}", "--calibrators-dir", out / "cal",
            "--metrics-dir", out / "met", "--plots-dir", out / "plot",
            "--compare", out / "c.csv"]  # fmt: skip
    res = subprocess.run(
        [sys.executable, "-c", PROBE, *map(str, args)], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.split("RC ")[-1].split() + (
        [res.stderr[-300:]] if "RC 0" not in res.stdout else []
    )


def test_a_numpy_only_calibrate_job_does_not_import_torch(tmp_path):
    assert _job(tmp_path, ["uncalibrated", "hist", "iso", "bbq", "venn_abers"]) == [
        "0", "TORCH", "False"
    ]  # fmt: skip


def test_the_probe_sees_torch_when_a_scaling_fit_needs_it(tmp_path):
    """The probe can fail: a job with temperature scaling imports torch."""
    assert _job(tmp_path, ["uncalibrated", "ts"]) == ["0", "TORCH", "True"]
