"""config/coursework_logits.yaml: the coursework study from the author's published logits."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CW = yaml.safe_load((REPO / "config" / "coursework.yaml").read_text())
CL = yaml.safe_load((REPO / "config" / "coursework_logits.yaml").read_text())
FOLDERS = {  # published-logits note §1.2: folder -> (N, K)
    "cifar10_v1": 10,
    "cifar100": 100,
    "imagenet": 1000,
    "focal_CIFAR10": 10,
    "focal_CIFAR100": 100,
    "focal_TinyImageNet": 200,
}


def test_generated_file_is_up_to_date():
    res = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_coursework_logits.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr


def test_same_models_labels_and_study_settings():
    assert list(CL["models"]) == list(CW["models"])
    assert len(CL["models"]) == 77
    for m, v in CL["models"].items():
        w = CW["models"][m]
        for k in ("dataset", "group", "expected_acc", "study_key", "display"):
            assert v.get(k) == w.get(k), (m, k)
        assert v["source"] == "logits"
        folder, stem = w["study_key"].split("/")
        lg = v["logits"]
        assert (lg["format"], lg["folder"], lg["file"]) == ("coursework", folder, stem + ".pt")
        assert FOLDERS[folder] == w["num_classes"]
        assert lg["yandex_disk"]["public_key"] == "https://disk.yandex.ru/d/9Awu1nwJOZv4Lg"
        assert lg["sha256"] is None  # nothing published: pinned on first use
        assert (lg.get("targets") == "class_blocks") == (folder == "imagenet")
    for key in ("calibrators", "evaluation", "compare", "plots", "report"):
        assert CL[key] == CW[key], key
    assert list(CL["calibrators"]) == ["uncalibrated", "hist", "iso", "ts", "vs", "vs_b", "ms_b"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("snakemake") is None, reason="snakemake not installed")
def test_plans_every_model_from_logits(tmp_path):
    res = subprocess.run(
        ["snakemake", "-n", "--quiet", "rules", "--configfile", "config/coursework_logits.yaml",
         "--directory", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    counts = {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"^\s*([a-z_]+)\s+(\d+)\s*$", res.stdout + res.stderr, re.M)
    }
    assert counts["import_logits"] == 77 and counts["split"] == 4
    assert counts["calibrate"] == 77
    assert counts["replication_tables"] == 1 and counts["reference_csv"] == 1
    for rule in ("download_dataset", "download_checkpoint", "cache_logits"):
        assert rule not in counts
