"""Imported and computed models mix in one dataset: an ``.npz`` whose labels are the dataset's,
in the dataset's order, joins config/test.yaml's tiny Fashion-MNIST model (trained here) through
the same study split, fitted and reported beside it; one label changed and the file is refused,
naming the index of the first mismatch. The imported file's order is known by its labels only
(calbench.split.LABELS_ONLY), which its provenance says."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from workflow_copy import copy_workflow, workflow_env

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]

if shutil.which("snakemake") is None:  # pragma: no cover
    pytest.skip("snakemake is not installed", allow_module_level=True)


def _env(root: Path) -> dict:
    env = workflow_env(root)
    return env


def smk(root: Path, *args) -> subprocess.CompletedProcess:
    cmd = ["snakemake", "--cores", "2", *map(str, args)]
    return subprocess.run(
        cmd, cwd=root, env=_env(root), capture_output=True, text=True, timeout=900
    )


def test_imported_file_joins_a_dataset_of_computed_models(tmp_path):
    root = copy_workflow(tmp_path / "wf")
    cfg = yaml.safe_load((root / "config.yaml").read_text())
    cfg["models"] = {"tiny_mlp": cfg["models"]["tiny_mlp"]}  # one computed model is enough
    cfg["calibrators"] = {c: cfg["calibrators"][c] for c in ("uncalibrated", "ts")}
    cfg["compare"]["baselines"] = ["uncalibrated", "ts"]
    (root / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    res = smk(root, "results/logits/fashion_mnist/tiny_mlp.npz")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    with np.load(root / "results/logits/fashion_mnist/tiny_mlp.npz") as f:
        y, computed_order = f["labels"], str(f["order_hash"])
    assert not computed_order.startswith("labels:")

    rng = np.random.default_rng(0)
    z = (rng.normal(size=(y.size, 10)) + 2.0 * np.eye(10)[y]).astype(np.float32)
    (root / "mine").mkdir()
    np.savez(root / "mine" / "mine.npz", logits=z, labels=y)
    bad = y.copy()
    bad[17] = (bad[17] + 1) % 10
    np.savez(root / "mine" / "bad.npz", logits=z, labels=bad)

    def entry(file):
        return {"dataset": "fashion_mnist", "source": "logits", "display": {"name": file},
                "logits": {"format": "npz", "file": file, "local_path": "mine"}}  # fmt: skip

    cfg["models"]["mine"] = entry("mine.npz")
    (root / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    res = smk(root)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "mine.npz" in (root / "reports" / "report.html").read_text()
    prov = json.loads((root / "results/logits/fashion_mnist/mine.source.json").read_text())
    assert prov["order_check"] == "labels only"
    for model in ("tiny_mlp", "mine"):
        assert (root / f"results/calibrators/fashion_mnist/{model}/ts.json").is_file()

    cfg["models"]["bad"] = entry("bad.npz")
    (root / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    res = smk(root, "results/calibrators/fashion_mnist/bad/ts.json")
    assert res.returncode != 0
    # mine and bad, two small local models of one dataset, are calibrated in one batch job
    # (workflow/rules/helpers/sizing.smk): its error names bad's logits and leaves no file of
    # the batch, mine's included
    log = (root / "logs/calibrate_batch/fashion_mnist__0.log").read_text()
    assert (
        "differs in labels from split results/split/fashion_mnist/split.npz, first at index 17"
        in log
    ), log[-2000:]
    assert "--logits results/logits/fashion_mnist/bad.npz" in log, log[-2000:]
    assert not (root / "results/calibrators/fashion_mnist/mine/ts.json").exists()
