"""The tiny study (config/test.yaml) moved, copied and edited (issue 33 groups 11-12, issue 30
item 6): a moved folder plans nothing (render_report included); the same study in two folders
gives byte-identical reports with SOURCE_DATE_EPOCH set, with no absolute path of the machine;
a changed ``datasets.*.limit`` succeeds in one run (the split, made from the dataset's entry, is
rebuilt) and retrains nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from workflow_copy import copy_workflow, job_counts

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow]

if shutil.which("snakemake") is None:  # pragma: no cover
    pytest.skip("snakemake is not installed (pip install -e .[workflow])", allow_module_level=True)


def smk(root: Path, *args, check=True) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root / "lib")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["SOURCE_DATE_EPOCH"] = "1622550896"
    env["GIT_CEILING_DIRECTORIES"] = str(root.parent)
    cmd = ["snakemake", "--cores", "2", "--configfile", "config.yaml", *map(str, args)]
    res = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    if check and res.returncode != 0:
        raise AssertionError(f"{cmd} failed:\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}")
    return res


def planned(root: Path) -> dict[str, int]:
    res = smk(root, "-n", "--quiet", "rules")
    return job_counts(res.stdout + res.stderr)


def test_moved_copied_and_limit_changed(tmp_path):
    first = copy_workflow(tmp_path / "home" / "alice" / "study")
    smk(first)
    # moved: nothing to do, render_report included (no absolute path among its inputs)
    moved = tmp_path / "elsewhere" / "bob" / "moved"
    moved.parent.mkdir(parents=True)
    shutil.move(first, moved)
    assert planned(moved) == {}
    # copied: the report rendered again in both folders is byte for byte the same
    copy = tmp_path / "third" / "copy"
    shutil.copytree(moved, copy, symlinks=True)
    for root in (moved, copy):
        smk(root, "--forcerun", "render_report")
    reports = [(r / "reports" / "report.html").read_bytes() for r in (moved, copy)]
    assert reports[0] == reports[1]
    html = reports[0].decode()
    for where in (str(tmp_path), "alice", "bob", str(REPO)):
        assert where not in html, where
    assert 'id="run-hardware"' in html and "left out: SOURCE_DATE_EPOCH is set" in html
    # a changed limit: one run succeeds, the split is rebuilt, nothing retrains
    cfg = yaml.safe_load((copy / "config.yaml").read_text())
    cfg["datasets"]["fashion_mnist"]["limit"] = 300
    (copy / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    plan = planned(copy)
    assert "train_model" not in plan and "download_dataset" not in plan, plan
    assert plan.get("split") == 1 and plan.get("cache_logits") == 2, plan
    smk(copy)  # fails on a stale split if the split is not rebuilt first
    assert planned(copy) == {}
