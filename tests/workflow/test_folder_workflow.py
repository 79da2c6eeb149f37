"""A folder of predictions is a study: a two-line config (``logits_folder:`` and a title) plans
the whole workflow, every calibrator of the default study included; with the calibrators
restricted (a third line, to keep the test short) it runs to the report, and again in one run
when the files are replaced by files of another N (the split rebuilt); a file in the folder
that is not logits and labels stops the workflow before any job, in one line naming it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from workflow_copy import copy_workflow, job_counts, workflow_env

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow]

if shutil.which("snakemake") is None:  # pragma: no cover
    pytest.skip("snakemake is not installed", allow_module_level=True)

TWO_LINES = "logits_folder: my_preds\nstudy: {title: My models}\n"


def _env(root: Path) -> dict:
    env = workflow_env(root)
    return env


def smk(root: Path, *args) -> subprocess.CompletedProcess:
    cmd = ["snakemake", "--cores", "2", *map(str, args)]
    return subprocess.run(
        cmd, cwd=root, env=_env(root), capture_output=True, text=True, timeout=900
    )


@pytest.fixture
def study(tmp_path):
    """The workflow (config.yaml: the default study's) and a folder of two N = 300, K = 3
    models."""
    root = copy_workflow(tmp_path / "wf", REPO / "config.yaml")
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 300)
    (root / "my_preds").mkdir()
    for name, sharp in (("ResNet-50", 2.0), ("mlp", 1.0)):
        z = sharp * (rng.normal(size=(300, 3)) + 1.5 * np.eye(3)[y])
        np.savez(root / "my_preds" / f"{name}.npz", logits=z.astype(np.float32), labels=y)
    (root / "study.yaml").write_text(TWO_LINES)
    return root


def test_two_line_config_plans_the_study(study):
    """The two lines plan every step, with the default study's calibrators."""
    assert len(TWO_LINES.splitlines()) == 2
    res = smk(study, "--configfile", "study.yaml", "-n", "--quiet", "rules")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert job_counts(res.stdout + res.stderr) == {
        "import_logits_batch_my_preds__0": 1,
        "split": 1,
        "calibrate_batch_my_preds__0": 1,
        "aggregate": 1,
        "render_report": 1,
        "all": 1,
    }  # fmt: skip: two small models, one import batch and one calibrate batch (helpers/sizing.smk)
    # config.yaml's calibrators, in its order: the calibrate spec the dry run writes
    (spec,) = (study / "results" / "specs").glob("calibrate-*.json")
    cals = yaml.safe_load((REPO / "config.yaml").read_text())["calibrators"]
    assert list(json.loads(spec.read_text())["calibrators"]) == list(cals)


def test_a_folder_of_many_files_is_imported_in_batches(study):
    """20 small files: two import jobs (16 + 4 models, helpers/sizing.smk), no job per model;
    each batch's inputs are exactly its models' spec files and local files' digests, and the
    code the verb runs."""
    rng = np.random.default_rng(2)
    y = rng.integers(0, 3, 300)
    for i in range(18):
        np.savez(study / "my_preds" / f"net{i:02d}.npz", logits=rng.normal(size=(300, 3)), labels=y)
    res = smk(study, "--configfile", "study.yaml", "-n", "--quiet", "rules")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    counts = job_counts(res.stdout + res.stderr)
    assert (
        counts["import_logits_batch_my_preds__0"] == counts["import_logits_batch_my_preds__1"] == 1
    )
    assert not {"import_logits", "import_logits_presplit", "cache_logits"} & set(counts), counts
    res = smk(study, "--configfile", "study.yaml", "-n", "results/logits/my_preds/net17.npz")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    job = (res.stdout + res.stderr).split("rule import_logits_batch_my_preds__1:", 1)[1]
    inputs = set(re.search(r"input: (.*)", job).group(1).split(", "))
    members = ["net15", "net16", "net17", "resnet_50"]  # the last 4 by name: mlp, net00, ...
    specs = {p for p in inputs if p.startswith("results/specs/")}
    assert {
        re.match(r"results/specs/model_(\w+)-[0-9a-f]+\.json$", p).group(1) for p in specs
    } == set(members)
    assert inputs - specs == {"results/code/import-logits.sha256"} | {
        f"results/inputs/logits/my_preds/{m}.sha256" for m in members
    }


def test_folder_study_runs_to_the_report(study):
    (study / "study.yaml").write_text(
        TWO_LINES + "calibrators: {uncalibrated: {}, ts: {}, iso: {}}\n"
    )
    res = smk(study, "--configfile", "study.yaml")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    html = (study / "reports" / "report.html").read_text()
    assert "<title>My models</title>" in html and "ResNet-50" in html
    cals = sorted(p.name for p in (study / "results/calibrators/my_preds/resnet_50").glob("*.json"))
    assert cals == ["iso.json", "ts.json", "uncalibrated.json"]
    logits = np.load(study / "results/logits/my_preds/mlp.npz")
    np.testing.assert_array_equal(logits["labels"], np.load(study / "my_preds/mlp.npz")["labels"])
    # both models were imported in one batch job and calibrated in another; each one's files
    # are the bytes a job of its own writes
    assert (study / "logs/import_logits_batch/my_preds__0.log").is_file()
    assert (study / "logs/calibrate_batch/my_preds__0.log").is_file()
    assert not (study / "logs/import_logits").exists() and not (study / "logs/calibrate").exists()
    (entry,) = (study / "results" / "specs").glob("model_mlp-*.json")
    alone = study / "alone_import"
    res = subprocess.run(
        ["calbench", "import-logits", "--spec", f"@{entry}", "--out", alone / "mlp.npz",
         "--provenance", alone / "mlp.source.json"],
        cwd=study, env=_env(study), capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    for name in ("mlp.npz", "mlp.source.json"):
        assert (alone / name).read_bytes() == (
            study / "results/logits/my_preds" / name
        ).read_bytes()
    alone = study / "alone"
    (spec,) = (study / "results" / "specs").glob("calibrate-*.json")
    res = subprocess.run(
        ["calbench", "calibrate", "--logits", "results/logits/my_preds/mlp.npz",
         "--split", "results/split/my_preds/split.npz", "--spec", f"@{spec}",
         "--calibrators-dir", alone / "cal", "--metrics-dir", alone / "met",
         "--plots-dir", alone / "plots", "--compare", alone / "compare.csv",
         "--robustness", alone / "robustness.csv"],
        cwd=study, env=_env(study), capture_output=True, text=True,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    batch = {
        "cal": "results/calibrators/my_preds/mlp", "met": "results/metrics/my_preds/mlp",
        "plots": "results/plots/my_preds/mlp", "compare.csv": "results/compare/my_preds/mlp.csv",
        "robustness.csv": "results/robustness/my_preds/mlp.csv",
    }  # fmt: skip
    files = sorted(p for p in alone.rglob("*") if p.is_file())
    # a folder study draws each model's grid alone (logits_sources/folder.py): a JSON and a CSV
    # per calibrator, the grid, the comparisons and the robustness CSV
    assert len(files) == 3 * 2 + 3
    assert [p.name for p in files if p.suffix == ".png"] == ["grid.png"]
    for path in files:
        rel = path.relative_to(alone)
        top = rel.parts[0]
        twin = (
            study / batch[top] / Path(*rel.parts[1:]) if len(rel.parts) > 1 else study / batch[top]
        )
        assert path.read_bytes() == twin.read_bytes(), rel
    # the folder's files replaced by files of another N: one run re-imports them and rebuilds
    # the split (made from the first file, as a dataset of files has no data of its own)
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 200)
    for name in ("ResNet-50", "mlp"):
        z = rng.normal(size=(200, 3)) + 1.5 * np.eye(3)[y]
        np.savez(study / "my_preds" / f"{name}.npz", logits=z.astype(np.float32), labels=y)
    res = smk(study, "--configfile", "study.yaml")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    with np.load(study / "results/split/my_preds/split.npz") as split:
        assert int(split["n"]) == 200


def test_a_file_that_is_not_logits_stops_the_workflow(study):
    np.savez(study / "my_preds" / "probs.npz", probs=np.ones((3, 2)))
    res = smk(study, "--configfile", "study.yaml", "-n")
    assert res.returncode != 0
    out = res.stdout + res.stderr
    line = next(x for x in out.splitlines() if "probs.npz" in x)
    assert "holds no logits and no labels" in line, out[-2000:]
    assert not (study / "results").exists()
