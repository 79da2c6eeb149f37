"""The real Snakemake workflow on the tiny configuration (config/test.yaml), via the CLI.

A private copy of the workflow and of the calbench sources runs in a temporary folder (the
copy is put first on PYTHONPATH, so editing a library module there is safe). Checked: the
outputs, that a finished run plans nothing, that adding a model / a calibrator plans only their
jobs, that editing one library module or the template reruns exactly the rules that use it,
that `snakemake --lint` is clean, that a bad config fails before any job with a message naming
the key, and that a run killed with SIGKILL and resumed gives the results of an uninterrupted run.
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from calbench.stats import NO_INTERVAL
from workflow_copy import copy_workflow, job_counts

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow]

if shutil.which("snakemake") is None:  # pragma: no cover
    pytest.skip("snakemake is not installed (pip install -e .[workflow])", allow_module_level=True)


def _env(root: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "lib"), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # the calbench entry point of this interpreter, first on PATH
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def smk(root: Path, *args, check=True, timeout=600, env=None) -> subprocess.CompletedProcess:
    cmd = ["snakemake", "--cores", "2", *map(str, args)]
    res = subprocess.run(
        cmd, cwd=root, env={**_env(root), **(env or {})}, capture_output=True, text=True,
        timeout=timeout,
    )
    if check and res.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}"
        )
    return res


def planned(root: Path, *args) -> dict[str, int]:
    """Job counts per rule of a dry run (``{}`` when nothing is to be done)."""
    res = smk(root, "-n", "--quiet", "rules", *args)
    return job_counts(res.stdout + res.stderr)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = copy_workflow(tmp_path_factory.mktemp("wf") / "repo")
    t0 = time.perf_counter()
    smk(root)
    print(f"tiny workflow: {time.perf_counter() - t0:.1f} s")
    return root


def _read(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _edit(path: Path):
    """Append a comment to ``path`` (a content change: Snakemake ignores bare mtime changes of
    inputs whose checksum it recorded); return a function restoring the original bytes."""
    original = path.read_bytes()
    comment = b"\n<!-- edited -->\n" if path.suffix == ".j2" else b"\n# edited\n"
    path.write_bytes(original + comment)
    return lambda: path.write_bytes(original)


def test_outputs(run):
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    models, methods = list(cfg["models"]), list(cfg["calibrators"])
    html = (run / "reports" / "report.html").read_text()
    # one reliability diagram per model and calibrator (uncalibrated, TS, best shown, rest folded)
    assert html.count("data:image/png;base64,") == len(models) * len(methods)
    assert html.index('id="findings"') < html.index('id="tables"')
    rows = _read(run / "results" / "aggregate" / "metrics.csv")
    n_metrics = len(cfg["evaluation"]["metrics"])
    assert len(rows) == len(models) * len(methods) * 2 * n_metrics
    ev = cfg["evaluation"]
    ci_halves = set(ev.get("ci_halves") or ev["halves"])
    ci_metrics = set(ev.get("ci_metrics") or ev["metrics"])
    for r in rows:
        if r["half"] in ci_halves and r["metric"] in ci_metrics - NO_INTERVAL:
            assert r["ci_low"] != "" and float(r["ci_low"]) <= float(r["ci_high"])
        else:
            assert r["ci_low"] == r["ci_high"] == ""
    for metric in cfg["report"]["table_metrics"]:
        for ext in ("html", "md", "csv", "tex"):
            assert (run / "results" / "tables" / f"{metric}.{ext}").is_file()
    assert (run / "results" / "tables" / "losses_ece.md").is_file()
    for m in models:
        for c in methods:
            assert (run / "results" / "plots" / "fashion_mnist" / m / f"{c}.png").read_bytes()[
                :4
            ] == b"\x89PNG"
    with np.load(run / "results" / "split" / "fashion_mnist" / "split.npz") as s:
        assert (
            len(s["val_idx"])
            == len(s["test_idx"])
            == cfg["datasets"]["fashion_mnist"]["limit"] // 2
        )
    assert (run / "logs" / "calibrate" / "fashion_mnist" / f"{models[0]}.log").is_file()
    assert (run / "benchmarks" / "calibrate" / "fashion_mnist" / f"{models[0]}.tsv").is_file()
    assert not [p for p in (run / "results").rglob(".*.tmp*")]  # no temporary files left


def test_finished_run_plans_nothing(run):
    assert planned(run) == {}


def test_lint_is_clean(run):
    res = smk(run, "--lint")
    assert "Congratulations" in res.stdout + res.stderr


def _with_config(run, edit, name):
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    edit(cfg)
    path = run / "config" / name
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return ["--configfile", path]


@pytest.mark.parametrize("where", ["last", "first"])
def test_adding_a_model_plans_only_its_jobs(run, where):
    """Wherever the new entry goes: in front of the dataset's first model too, the split (the
    dataset's own, made from no model's logits) is kept, not rebuilt with every step after it."""

    def edit(cfg):
        extra = dict(cfg["models"]["tiny_mlp"])
        extra["training"] = {**extra["training"], "seed": 1}
        extra["display"] = {**extra["display"], "seed": 1}  # its own row in the tables
        if where == "last":
            cfg["models"]["tiny_mlp_seed1"] = extra
        else:
            cfg["models"] = {"tiny_mlp_seed1": extra, **cfg["models"]}

    assert planned(run, *_with_config(run, edit, f"more_models_{where}.yaml")) == {
        "train_model": 1,
        "cache_logits": 1,
        "calibrate": 1,
        "aggregate": 1,
        "render_report": 1,
        "all": 1,
    }


def test_adding_a_calibrator_plans_only_its_jobs(run):
    def edit(cfg):
        cfg["calibrators"]["ts_f64"] = {"method": "ts", "params": {"dtype": "float64"}}

    n_models = len(yaml.safe_load((run / "config.yaml").read_text())["models"])
    # one calibration job per model: its grid and paired comparisons include the new calibrator
    assert planned(run, *_with_config(run, edit, "more_cals.yaml")) == {
        "calibrate": n_models,
        "aggregate": 1,
        "render_report": 1,
        "all": 1,
    }


def test_editing_one_model_reruns_only_that_model(run):
    def edit(cfg):
        cfg["models"]["tiny_mlp_fl2"]["training"]["lr"] = 0.01

    assert planned(run, *_with_config(run, edit, "one_model.yaml")) == {
        "train_model": 1,
        "cache_logits": 1,
        "calibrate": 1,
        "aggregate": 1,
        "render_report": 1,
        "all": 1,
    }


def test_the_split_is_the_datasets_own(run):
    """The split depends on the dataset's N and labels only: retraining the model listed first
    (whose logits the split was once made from, an ancient() input only while the split was
    newer than its code input) or touching its logits rebuilds no split and reruns no other
    model's job; a changed limit rebuilds it (tests/workflow/
    test_moved_and_stale.py runs that to the end)."""

    def retrain(cfg):
        cfg["models"]["tiny_mlp"]["training"]["lr"] = 0.01

    def limit(cfg):
        cfg["datasets"]["fashion_mnist"]["limit"] = 300

    first = yaml.safe_load((run / "config.yaml").read_text())["models"]
    assert next(iter(first)) == "tiny_mlp"
    # an edit of split.py seen by a dry run, then undone: the code input is written twice (same
    # content, newer file); no file time decides what the split is made from
    restore = _edit(run / "lib" / "calbench" / "split.py")
    try:
        assert planned(run).get("split") == 1
    finally:
        restore()
    assert planned(run) == {}
    assert planned(run, *_with_config(run, retrain, "retrain_first.yaml")) == {
        "train_model": 1,
        "cache_logits": 1,
        "calibrate": 1,
        "aggregate": 1,
        "render_report": 1,
        "all": 1,
    }
    logits = run / "results" / "logits" / "fashion_mnist" / "tiny_mlp.npz"
    os.utime(logits, (time.time() + 5, time.time() + 5))
    assert planned(run) == {}
    plan = planned(run, *_with_config(run, limit, "limit.yaml"))
    assert plan.get("split") == 1 and "train_model" not in plan, plan


def test_renaming_a_model_reruns_only_tables_and_report(run):
    def edit(cfg):
        cfg["models"]["tiny_mlp"]["display"]["name"] = "Perceptron"

    assert planned(run, *_with_config(run, edit, "rename.yaml")) == {
        "aggregate": 1,
        "render_report": 1,
        "all": 1,
    }


def test_template_edit_reruns_only_render_report(run):
    restore = _edit(run / "lib" / "calbench" / "templates" / "report" / "sections" / "tables.html.j2")
    try:
        assert planned(run) == {"render_report": 1, "all": 1}
    finally:
        restore()
    assert planned(run) == {}


def _rules_running(module: str) -> list[str]:
    """Rules of the workflow whose verb executes library file ``module`` (calbench._sources)."""
    from calbench._sources import verb_sources

    out = []
    for smk in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        for m in re.finditer(r"^rule (\w+):\n(.*?)(?=^rule |\Z)", smk.read_text(), re.S | re.M):
            lib = re.findall(r'lib_sources\("([\w-]+)"\)', m.group(2))
            verb = lib[0].replace("_", "-") if lib else None
            if verb and any(p.endswith("/calbench/" + module) for p in verb_sources(verb)):
                out.append(m.group(1))
    return out


@pytest.mark.parametrize(
    "module",
    ["stats/robustness.py", "_torch.py", "logits.py", "split.py", "plots/reliability.py", "stats/intervals.py", "report/render.py",
     "report/tables.py", "calibrators/scaling.py", "metrics/ece.py", "training/loop.py",
     "shift/corruptions.py"],
)
def test_library_edit_reruns_exactly_the_jobs_that_run_it(run, module):
    """Editing a module plans exactly the jobs of the rules whose verb executes it, and their
    dependants: the same plan as ``--forcerun`` of those rules."""
    in_dag = set(planned(run, "--forceall"))  # rules of other studies are not in this DAG
    rules = [r for r in _rules_running(module) if r in in_dag]
    expected = planned(run, "--forcerun", *rules) if rules else {}
    restore = _edit(run / "lib" / "calbench" / module)
    try:
        got = planned(run)
    finally:
        restore()
    assert got == expected
    if module == "stats/robustness.py":  # the calibrate step runs it: every model's job, not training
        n_models = len(yaml.safe_load((run / "config.yaml").read_text())["models"])
        assert got["calibrate"] == n_models and "train_model" not in got
    if module == "split.py":  # everything downstream of the split, not the models
        assert got.get("split") == 1 and "train_model" not in got and "cache_logits" not in got


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c["models"]["tiny_mlp"].update(sources="train"), "sources"),
        (lambda c: c["models"]["tiny_mlp"]["training"].update(epochs="one"), "epochs"),
        (lambda c: c["calibrators"].update({"Bad Name": {}}), "Bad Name"),
        (lambda c: c["compare"].update(baselines=["nope"]), "compare.baselines"),
        (lambda c: c["calibrators"].update(foo={}), "calibrators.foo: unknown calibrator 'foo'"),
        (lambda c: c["calibrators"].update(ts={"params": {"max_iters": 5}}),
         "calibrators.ts.params: calibrator ts has no parameter(s) ['max_iters']; accepted:"),
        (lambda c: c["evaluation"]["metrics"].append("ecee"), "evaluation.metrics: unknown metric"),
        (lambda c: c["models"]["tiny_mlp"].update(arch="mlpp"), "models.tiny_mlp.arch: unknown"),
        (lambda c: c["models"]["tiny_mlp"]["training"].update(loss="focall"),
         "models.tiny_mlp.training.loss: unknown loss"),
        (lambda c: c.update(foo=1), "invalid config at (top level): Additional properties"),
    ],
)
def test_bad_config_fails_before_any_job(run, edit, message, tmp_path):
    res = smk(run, "-n", *_with_config(run, edit, "bad.yaml"), check=False)
    assert res.returncode != 0
    assert message in res.stdout + res.stderr
    assert len((res.stdout + res.stderr).splitlines()) < 30  # the error, not a schema dump


def test_display_names_with_braces_are_text(run):
    def edit(cfg):
        cfg["models"]["tiny_mlp"]["display"]["name"] = "Net {v2}"
        cfg["study"]["title"] = "A {study}"

    assert planned(run, *_with_config(run, edit, "braces.yaml")) == {
        "aggregate": 1,
        "render_report": 1,
        "all": 1,
    }


def test_two_clean_runs_are_byte_identical(run, tmp_path):
    """Every file under results/ and reports/ (models, histories, logits, tables, figures,
    report) is identical between two runs from scratch, and no process outlives the run."""
    root = _copy_sources(run, tmp_path / "again")
    smk(root)
    # no process outlives its job: nothing runs in the workflow's folder once snakemake returned
    lingering = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(proc / "cwd")).is_relative_to(root):
                lingering.append(proc.name)
        except OSError:
            continue
    assert lingering == []
    # the run's date, time and wall time are the fields allowed to differ (SOURCE_DATE_EPOCH
    # pins the date and leaves the wall time out)
    date = re.compile(rb'(<tr id="run-(?:date|wall)">).*?(</tr>)', re.S)

    def read(p):
        return date.sub(rb"\1\2", p.read_bytes()) if p.suffix == ".html" else p.read_bytes()

    for sub in ("results", "reports"):
        a = {p.relative_to(run): read(p) for p in sorted((run / sub).rglob("*")) if p.is_file()}
        b = {p.relative_to(root): read(p) for p in sorted((root / sub).rglob("*")) if p.is_file()}
        # other tests' dry runs with edited configs add their own results/specs files to `run`
        a = {k: v for k, v in a.items() if k.parts[:2] != ("results", "specs") or k in b}
        assert sorted(a) == sorted(b)
        assert [k for k in a if a[k] != b[k]] == []


def _copy_sources(run: Path, dest: Path) -> Path:
    """A fresh workflow folder with the same sources as ``run`` (not the repository's current
    ones, which may have changed since ``run`` was made) and no results."""
    dest.mkdir(parents=True)
    shutil.copy2(run / "Snakefile", dest / "Snakefile")
    shutil.copy2(run / "config.yaml", dest / "config.yaml")
    for sub in ("workflow", "profiles", "config", "envs", "lib"):
        shutil.copytree(run / sub, dest / sub, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _result_files(root: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted((root / "results").rglob("*")):
        if p.name.startswith("."):
            # SIGKILL gives atomic_path no chance to remove its hidden temporary file; it is
            # never an output (Snakemake does not know it) and never mistaken for one
            assert re.match(r"^\.[\w.-]+\.tmp\.\w+$", p.name), p
            continue
        if p.parent.name == "specs":  # config slices, also written by other tests' dry runs
            continue
        if p.is_file() and p.suffix in (".csv", ".json", ".png", ".md", ".html", ".tex"):
            out[str(p.relative_to(root))] = p.read_bytes()
    # the run's date, time and wall time are the fields allowed to differ (SOURCE_DATE_EPOCH
    # pins the date and leaves the wall time out)
    html = (root / "reports" / "report.html").read_bytes()
    out["reports/report.html"] = re.sub(rb'(<tr id="run-(?:date|wall)">).*?(</tr>)', rb"\1\2", html)
    return out


def test_sigkill_midway_then_rerun_gives_identical_results(run, tmp_path):
    root = _copy_sources(run, tmp_path / "repo")
    proc = subprocess.Popen(
        ["snakemake", "--cores", "2"],
        cwd=root,
        env=_env(root),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 300
        target = root / "results" / "metrics"
        while time.time() < deadline and proc.poll() is None:
            if target.exists() and len(list(target.rglob("*.csv"))) >= 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert not (root / "reports" / "report.html").exists()
    smk(root, "--unlock")
    smk(root)
    ours, ref = _result_files(root), _result_files(run)
    assert sorted(ours) == sorted(ref)
    different = [k for k in ours if ours[k] != ref[k]]
    assert different == []  # no wall-clock times in any output (they go to the logs)
    for p in (run / "results" / "logits").rglob("*.npz"):
        with np.load(p) as a, np.load(root / p.relative_to(run)) as b:
            np.testing.assert_array_equal(a["logits"], b["logits"])


def _bench_workflow():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_workflow", REPO / "perf" / "bench_workflow.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_workflow_totals_the_benchmark_files(run, capsys):
    """perf/bench_workflow.py: one record per job, totals equal to the files' sums."""
    bench = _bench_workflow()
    by_rule = bench.collect(run)
    files = list((run / "benchmarks").rglob("*.tsv"))
    assert sum(len(v) for v in by_rule.values()) == len(files)
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert len(by_rule["calibrate"]) == len(cfg["models"])
    cpu = 0.0
    for f in files:
        header, values = f.read_text().splitlines()[:2]
        row = dict(zip(header.split("\t"), values.split("\t"), strict=True))
        log = run / "logs" / f.relative_to(run / "benchmarks").with_suffix(".log")
        exact = bench.logged_cpu(log)  # a calbench verb's own last line, else the sampled figure
        if exact is not None:
            cpu += exact
        else:
            cpu += float(row["cpu_time"]) if row["cpu_time"] not in ("", "NA") else 0.0
    # every calbench job logs its exact CPU time
    assert all(r["cpu_from_log"] for r in by_rule["calibrate"] + by_rule["train_model"])
    summary = bench.summarize(by_rule)
    assert summary["cpu_s"] == pytest.approx(cpu)
    assert summary["jobs"] == len(files)
    longest = max(r["s"] for recs in by_rule.values() for r in recs)
    assert longest <= summary["wall_s"] + 1e-6
    assert bench.main(["--root", str(run)]) == 0
    out = capsys.readouterr().out
    assert "calibrate" in out and "jobs' span" in out


def test_bench_workflow_cores_values():
    """--cores takes positive integers or all (the README's snakemake --cores all)."""
    bench = _bench_workflow()
    assert bench.parse_cores("all") == "all" and bench.parse_cores(" 3") == 3
    assert bench.machine_cores() == len(os.sched_getaffinity(0))
    assert bench.busy_cores("all") == bench.busy_cores(10**6) == bench.machine_cores()
    assert bench.busy_cores(1) == 1
    for bad in ("0", "-2", "x", "2.5"):
        with pytest.raises(ValueError, match="positive integers or 'all'"):
            bench.parse_cores(bad)


def test_bench_workflow_known_span(tmp_path):
    """Two hand-made benchmark files: span = last end - first start, per-rule sums."""
    bench = _bench_workflow()
    head = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    for rule, s, cpu, end in (("a", 2.0, 1.5, 1000.0), ("b", 3.0, "NA", 1010.0)):
        d = tmp_path / "benchmarks" / rule / "x"
        d.mkdir(parents=True)
        f = d / "j.tsv"
        f.write_text(head + f"{s}\t0:00:0{int(s)}\t1\t1\t1\t1\t0\t0\t0\t{cpu}\n")
        os.utime(f, (end, end))
    summary = bench.summarize(bench.collect(tmp_path))
    assert summary["wall_s"] == pytest.approx(1010.0 - (1000.0 - 2.0))
    assert summary["cpu_s"] == pytest.approx(1.5)
    assert summary["rules"]["b"] == {
        "jobs": 1,
        "cpu_s": 0.0,
        "mean_cpu_s": 0.0,
        "wall_s": 3.0,
        "max_wall_s": 3.0,
    }
    assert bench.main(["--root", str(tmp_path / "nowhere")]) == 2


def test_snakemake_report(run, tmp_path):
    """`snakemake --report report.zip`: the standard Snakemake report holds the HTML report, the
    result tables and the reliability diagrams marked with report(), with their captions."""
    import zipfile

    out = tmp_path / "report.zip"
    smk(run, "--report", out)
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
        index = next(n for n in names if n.endswith("report/report.html"))
        page = z.read(index).decode()
    files = {Path(n).name for n in names}
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert "report.html" in files
    assert {f"{m}.csv" for m in cfg["report"]["table_metrics"]} <= files
    assert {f"{c}.png" for c in cfg["calibrators"]} <= files
    assert "Post-hoc calibration study" in page  # workflow/report/workflow.rst
    assert "Reliability diagrams" in page and "Tables" in page  # categories
