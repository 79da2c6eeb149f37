"""The arena in the real workflow (tiny config): with another library's implementation of a
method calbench has (netcal.ts beside ts, sklearn.iso beside iso), the compare_implementations
rule writes results/arena/{dataset}/{model}.csv/.html and the report shows the implementations
side by side; without adapters (the default) no such job is planned and the section is absent."""

from __future__ import annotations

import csv
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
    pytest.skip("snakemake is not installed", allow_module_level=True)
pytest.importorskip("netcal")
pytest.importorskip("sklearn")


def _smk(root: Path, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root / "lib")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    cmd = ["snakemake", "--cores", "2", *map(str, args)]
    res = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1200)
    if res.returncode != 0:
        raise AssertionError(f"{cmd} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return res


def _planned(root: Path, *args) -> dict[str, int]:
    res = _smk(root, "-n", "--quiet", "rules", *args)
    return job_counts(res.stdout + res.stderr)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = copy_workflow(tmp_path_factory.mktemp("arena_wf") / "repo", config=None)
    cfg = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    (root / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    default_plan = _planned(root)
    cfg["calibrators"]["netcal_ts"] = {"method": "netcal.ts", "display": "T-scaling (netcal)"}
    cfg["calibrators"]["sklearn_iso"] = {"method": "sklearn.iso", "display": "Isotonic (sklearn)"}
    (root / "arena.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    _smk(root, "--configfile", "arena.yaml")
    return root, cfg, default_plan


def test_no_adapters_no_arena_job(run):
    _, _, default_plan = run
    assert "compare_implementations" not in default_plan and default_plan["render_report"] == 1


def test_the_rule_compares_each_methods_implementations(run):
    root, cfg, _ = run
    for model in cfg["models"]:
        path = root / "results" / "arena" / "fashion_mnist" / f"{model}.csv"
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        pairs = {(r["a"], r["b"]) for r in rows}
        assert pairs == {("ts", "netcal.ts"), ("iso", "sklearn.iso")}
        assert {r["quantity"] for r in rows} == {"probability", *cfg["report"]["table_metrics"]}
        prob = {(r["a"], r["b"]): float(r["max_abs_diff"]) for r in rows if r["quantity"] == "probability"}
        # isotonic regression has one solution (pool adjacent violators): equal up to rounding;
        # two temperature-scaling optimisers land within a small tolerance of each other
        assert prob[("iso", "sklearn.iso")] < 1e-12
        assert 0 <= prob[("ts", "netcal.ts")] < 1e-3
        html = path.with_suffix(".html").read_text()
        assert html.startswith('<table class="arena">') and "netcal.ts" in html
    assert _planned(root, "--configfile", "arena.yaml") == {}


def test_the_report_shows_them_side_by_side(run):
    root, cfg, _ = run
    html = (root / "reports" / "report.html").read_text()
    section = html.split('<section id="arena">', 1)[1].split("</section>", 1)[0]
    assert "Implementations side by side" in section
    assert "<td>ts</td><td>netcal.ts</td>" in section and "<td>iso</td><td>sklearn.iso</td>" in section
    assert section.count("<details>") == len(cfg["models"])
    assert html.index('<section id="arena">') < html.index('<h2 id="protocol">')
