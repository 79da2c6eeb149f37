"""Files a rule reads outside the workflow's outputs are its inputs: replacing the file a
``source: logits`` model reads through ``logits.local_path`` reruns exactly that model's import
and what depends on it, even when the new file keeps the old one's mtime (its SHA-256 is the
input, workflow/rules/helpers/logits.smk); the other model's steps stay done."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from workflow_copy import copy_workflow, job_counts

pytestmark = [pytest.mark.slow]

if shutil.which("snakemake") is None:  # pragma: no cover
    pytest.skip("snakemake is not installed (pip install -e .[workflow])", allow_module_level=True)

N = 120
TARGETS = [f"results/compare/mine/{m}.csv" for m in ("net_a", "net_b")]


def smk(root: Path, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root / "lib")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    cmd = ["snakemake", "--cores", "2", *map(str, args)]
    res = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"{cmd} failed:\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
    return res


def _npz(path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, N)
    z = rng.normal(size=(N, 4)).astype(np.float32)
    z[np.arange(N), y] += 3.0
    val = np.arange(0, N, 2)
    np.savez(path, logits=z, labels=y, val_idx=val, test_idx=np.setdiff1d(np.arange(N), val))


def test_a_replaced_local_file_reruns_exactly_its_model(tmp_path):
    root = copy_workflow(tmp_path / "study")
    cfg = yaml.safe_load((root / "config.yaml").read_text())
    files = tmp_path / "user"
    files.mkdir()
    cfg["datasets"] = {"mine": {"display": "Mine"}}
    cfg["models"] = {}
    for i, m in enumerate(("net_a", "net_b")):
        _npz(files / f"{m}.npz", i)
        cfg["models"][m] = {
            "dataset": "mine",
            "source": "logits",
            "logits": {
                "format": "npz",
                "file": f"{m}.npz",
                "split": "file",
                "local_path": str(files / f"{m}.npz"),
            },
        }
    cfg["calibrators"] = {"uncalibrated": {"display": "Uncalibrated"}, "ts": {"display": "TS"}}
    cfg["evaluation"] = {**cfg["evaluation"], "n_bootstrap": 5, "metrics": ["accuracy", "ece_ub"]}
    cfg["compare"] = {**cfg["compare"], "n_bootstrap": 5, "metrics": ["ece_ub"]}
    cfg["compare"]["select_folds"] = 2
    cfg["report"] = {**cfg["report"], "table_metrics": ["accuracy"], "losses_metrics": ["ece_ub"]}
    (root / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    smk(root, *TARGETS)
    assert job_counts(smk(root, *TARGETS, "-n", "--quiet", "rules").stdout) == {}
    # another file in net_a's place, with the old file's times: only net_a's steps rerun (the
    # import and the calibrate job of the batches it shares with net_b: two small local models
    # of one dataset, workflow/rules/helpers/sizing.smk; net_b's calibrators are copied back
    # from results/calibrate_cache/, not refitted)
    path = files / "net_a.npz"
    st = path.stat()
    _npz(path, 7)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    planned = job_counts(smk(root, *TARGETS, "-n", "--quiet", "rules").stdout)
    assert planned == {"import_logits_presplit_batch_mine__0": 1, "calibrate_batch_mine__0": 1}
    smk(root, *TARGETS)
    prov = json.loads((root / "results/logits/mine/net_a.source.json").read_text())
    from calbench.io import file_digest

    assert prov["files"][0]["sha256"] == file_digest(path)  # the new file's, not the old one's
    assert job_counts(smk(root, *TARGETS, "-n", "--quiet", "rules").stdout) == {}
