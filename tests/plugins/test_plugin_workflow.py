"""The example plug-in (examples/my_calibrator) end to end in the real workflow (tiny config):
one config line per plug-in puts the calibrator in every table, comparison, ranking and
diagram and the metric in the tables; editing the plug-in's source reruns exactly the jobs that
run it and the report (a dry run after the edit)."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from plugin_site import make_plugin_path

from workflow_copy import copy_workflow, job_counts

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow]

if shutil.which("snakemake") is None:  # pragma: no cover
    pytest.skip("snakemake is not installed", allow_module_level=True)


def _smk(root: Path, *args, check=True) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "lib"), str(root / "site")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    cmd = ["snakemake", "--cores", "2", *map(str, args)]
    res = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1200)
    if check and res.returncode != 0:
        raise AssertionError(f"{cmd} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return res


def _planned(root: Path) -> dict[str, int]:
    res = _smk(root, "-n", "--quiet", "rules")
    return job_counts(res.stdout + res.stderr)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = copy_workflow(tmp_path_factory.mktemp("plugin_wf") / "repo", config=None)
    make_plugin_path(root / "site")  # the example, as `pip install -e examples/my_calibrator`
    cfg = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    # the one config line per plug-in (plus naming the metric where tables and tests read it)
    cfg["calibrators"]["mine"] = {"method": "mix_uniform", "display": "Mix-uniform"}
    cfg["evaluation"]["metrics"].append("citl")
    cfg["report"]["table_metrics"].append("citl")
    # citl is a plug-in absolute gap (verdicts=False): tabulated, never tested or ranked
    (root / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    _smk(root)
    return root


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_plugin_is_in_every_output(run):
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    models = list(cfg["models"])
    metrics = _rows(run / "results" / "aggregate" / "metrics.csv")
    assert {r["model"] for r in metrics if r["method"] == "mine"} == set(models)
    assert {r["metric"] for r in metrics if r["method"] == "mine"} == set(
        cfg["evaluation"]["metrics"]
    )
    citl = [r for r in metrics if r["metric"] == "citl"]
    assert len(citl) == len(models) * len(cfg["calibrators"]) * 2
    compare = _rows(run / "results" / "aggregate" / "compare.csv")
    assert {r["metric"] for r in compare if "mine" in (r.get("method"), r.get("baseline"))} >= {
        "ece_ub", "nll"
    }  # fmt: skip
    assert "citl" not in {r["metric"] for r in compare}  # descriptive: no test drawn from it
    for m in models:
        png = run / "results" / "plots" / "fashion_mnist" / m / "mine.png"
        assert png.read_bytes()[:4] == b"\x89PNG"
        assert "mine" in (run / "results" / "robustness" / "fashion_mnist" / f"{m}.csv").read_text()
    for metric in ("ece", "citl"):
        assert "Mix-uniform" in (run / "results" / "tables" / f"{metric}.html").read_text()
    html = (run / "reports" / "report.html").read_text()
    assert "Mix-uniform" in html and "CITL, %" in html
    # both plug-ins' sources are cited: render-report loads the ones its spec names
    assert "Szegedy et al. 2016" in html and "Steyerberg 2010" in html


def test_editing_the_plugin_reruns_its_jobs_and_the_report(run):
    assert _planned(run) == {}
    src = run / "site" / "my_calibrator" / "__init__.py"
    original = src.read_bytes()
    try:
        src.write_bytes(original + b"\n# edited\n")
        n_models = len(yaml.safe_load((run / "config.yaml").read_text())["models"])
        assert _planned(run) == {
            "calibrate": n_models,
            "aggregate": 1,
            "render_report": 1,
            "all": 1,
        }
    finally:
        src.write_bytes(original)
