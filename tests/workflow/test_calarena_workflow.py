"""CalArena through the workflow: a calarena: section makes one model per listed experiment of a
benchmark file written here in CalArena's layout, and the replication tables put every cell
beside CalArena's packaged published result for the same calibrator and experiment (ours /
published / difference)."""

from __future__ import annotations

import csv
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from workflow_copy import copy_workflow, workflow_env

h5py = pytest.importorskip("h5py")

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]

if shutil.which("snakemake") is None:  # pragma: no cover
    pytest.skip("snakemake is not installed", allow_module_level=True)

CONFIG = """\
study: {title: CalArena in small}
calarena:
  benchmark: cv-multiclass
  experiments: [c10/densenet40, oct/vit]
  logits: {local_path: h5}
calibrators: {uncalibrated: {}, ts: {}}
evaluation: {metrics: [accuracy, ece, cwece, nll, brier, ece_ub], n_bootstrap: 20}
compare: {baselines: [uncalibrated], metrics: [nll], n_bootstrap: 20, select_folds: 2}
report:
  table_metrics: [accuracy, ece, nll, brier]
  reference: {csv: resources/reference/calarena_cv_multiclass.csv, units: fraction}
"""


def _env(root: Path) -> dict:
    env = workflow_env(root)
    return env


def _probs(rng, y, k):
    """Over-confident probabilities that predict ``y`` better than chance."""
    z = 3.0 * (rng.normal(size=(y.size, k)) + 1.5 * np.eye(k)[y])
    p = np.exp(z - z.max(1, keepdims=True))
    return (p / p.sum(1, keepdims=True)).astype(np.float32)


def test_calarena_benchmark_beside_its_published_results(tmp_path):
    root = copy_workflow(tmp_path / "wf", REPO / "config.yaml")
    rng = np.random.default_rng(0)
    (root / "h5").mkdir()
    with h5py.File(root / "h5" / "cv-multiclass.h5", "w") as f:
        f.attrs["problem_type"] = "multiclass"
        for group, k in (("c10/densenet40", 10), ("oct/vit", 4)):
            g = f.create_group(group)
            for part, n in (("cal", 120), ("test", 100)):
                y = rng.integers(0, k, n)
                g.create_dataset(f"probas_{part}", data=_probs(rng, y, k))
                g.create_dataset(f"labels_{part}", data=y.astype(np.int32))
    (root / "study.yaml").write_text(CONFIG)
    res = subprocess.run(
        ["snakemake", "--cores", "2", "--configfile", "study.yaml"],
        cwd=root, env=_env(root), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    with open(root / "results/replication/cells.csv", newline="") as fh:
        cells = {(r["model"], r["method"], r["metric"]): r for r in csv.DictReader(fh)}
    assert {m for m, _, _ in cells} == {"c10_densenet40", "oct_vit"}
    ts = cells[("c10_densenet40", "ts", "nll")]
    assert float(ts["published"]) == pytest.approx(0.22508591413497925)  # CalArena's TS.csv
    ours = float(ts["ours"])
    assert float(ts["difference"]) == pytest.approx(ours - 0.22508591413497925)
    base = cells[("oct_vit", "uncalibrated", "accuracy")]
    assert float(base["published"]) == pytest.approx(0.699999988079071)  # Base-model.csv
    assert (root / "reports" / "report.html").is_file()
