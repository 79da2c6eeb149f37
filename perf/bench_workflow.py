"""Per-rule CPU totals and the wall time of a workflow run, from Snakemake's benchmark files.

Every rule writes ``benchmarks/<rule>/....tsv`` (Snakemake's ``benchmark:`` directive: one header
line and one row with ``s`` = the job's wall seconds and ``cpu_time`` = CPU seconds of the job's
process tree, sampled: Snakemake looks every half second, then every 30 s, so a job longer than
its first samples is undercounted). A ``calbench`` verb prints its exact CPU seconds as the last
line of its log (``calbench.cli.resource_line``); where that line exists the script takes it
instead. This script reads them from a finished run and prints, per rule, the number of
jobs, their total and mean CPU seconds, total and largest wall seconds; then the run's wall time
(first job start = file time - ``s``, to the last job's end) and how busy the cores were.

    python perf/bench_workflow.py                  # the run in this folder
    python perf/bench_workflow.py --root /tmp/run  # another run's folder
    python perf/bench_workflow.py --run --cores all  # rebuild here first (deletes nothing:
                                                         # use `snakemake --delete-all-output`)

    python perf/bench_workflow.py --scenarios --cores all,8   # the speed targets, below

``--scenarios`` copies the project (its git-tracked files, as they are in the working tree) into
a scratch folder (``--workdir``, default a new temporary folder) and times, for each ``--cores``
value, the README's command from scratch and then the everyday edits, each a real
``snakemake --cores N`` run, against the targets of the issue "real studies at real scale":

=================  =================================================  ==============================
scenario           what changes                                       target (wall)
=================  =================================================  ==============================
rebuild            nothing built yet (download, train, ..., report)   1.25 x trainings' CPU / cores
no-op              nothing                                            Snakemake's one-rule no-op
                                                                      + 0.5 s (same machine)
add a model        a LeNet-5 with another seed under ``models:``      its training + logits + 20 s
add a calibrator   ``ts`` in float32 under ``calibrators:``           30 s
template edit      a comment appended to the report template         10 s
=================  =================================================  ==============================

Snakemake's floor is measured first: the best of three no-ops of a scratch one-rule Snakefile
with this environment's Snakemake and plugins. It prints one row per scenario (wall and CPU
seconds, jobs run, target and how it was derived, met or not) plus the rebuild's per-rule
table. On an idle 2-core machine the default study's scenarios take about 7 min at one
``--cores`` value (rebuild ~4 min, add a model ~1.5, add a calibrator ~1.5, the rest seconds);
``--models 1`` tries the script in about 2 min (figures not the default study's).
``perf/bench_coursework_logits.py --targets`` prints these rows with the other targets.
Only the figures are printed; no speed target is asserted in a test.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def read_benchmark(path) -> dict:
    """One benchmark file -> ``{"s", "cpu_s", "peak_mb", "end"}`` (``peak_mb``: Snakemake's
    sampled ``max_rss``; ``end``: the file's mtime)."""
    path = Path(path)
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    if not rows or "s" not in rows[0]:
        raise ValueError(f"{path} is not a Snakemake benchmark file (no 's' column); delete it")
    row = rows[-1]

    def num(key):
        value = row.get(key)
        try:
            return float(value)
        except (TypeError, ValueError):
            return 0.0  # "NA" for jobs too short to be sampled

    return {
        "s": num("s"),
        "cpu_s": num("cpu_time"),
        "peak_mb": num("max_rss"),
        "end": path.stat().st_mtime,
    }


#: the last stderr line of a successful ``calbench`` verb (``calbench.cli.resource_line``)
_RESOURCE_LINE = re.compile(r"^calbench \S+: ([0-9.]+) CPU-s, ([0-9.]+) MB peak memory")


def logged_resources(log) -> tuple[float, float] | None:
    """``(CPU seconds, peak MB)`` a job's ``calbench`` verb printed as the last line of its log
    (exact: the process's own rusage), or ``None`` (no such log or line: a shell rule, an older
    run)."""
    try:
        lines = Path(log).read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines[-5:]):
        m = _RESOURCE_LINE.match(line)
        if m:
            return float(m.group(1)), float(m.group(2))
    return None


def logged_cpu(log) -> float | None:
    """The exact CPU seconds of :func:`logged_resources`, or ``None``."""
    found = logged_resources(log)
    return None if found is None else found[0]


def collect(root) -> dict[str, list[dict]]:
    """``{rule: [benchmark records]}`` for every ``<root>/benchmarks/<rule>/**/*.tsv``."""
    base = Path(root) / "benchmarks"
    if not base.is_dir():
        raise ValueError(f"{base} does not exist; pass --root the folder a workflow ran in")
    out: dict[str, list[dict]] = {}
    for rule_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        recs = []
        for f in sorted(rule_dir.rglob("*.tsv")):
            rec = read_benchmark(f)
            # the job's own CPU line (exact) over Snakemake's sampled figures, which miss
            # the end of any job longer than its first sampling interval, and its peak memory
            job = f.relative_to(rule_dir).with_suffix("")
            exact = logged_resources(Path(root) / "logs" / rule_dir.name / f"{job}.log")
            rec["job"] = job.as_posix()
            rec["cpu_from_log"] = exact is not None
            if exact is not None:
                rec["cpu_s"], rec["peak_mb"] = exact
            recs.append(rec)
        if recs:
            out[rule_dir.name] = recs
    if not out:
        raise ValueError(f"no benchmark files under {base}; run the workflow first")
    return out


def summarize(by_rule: dict[str, list[dict]]) -> dict:
    """Per-rule totals plus the run's span: ``{"rules": {rule: {...}}, "wall_s", "cpu_s"}``.

    The span runs from the earliest job start (``end - s``) to the latest job end, so it covers
    the jobs only (not Snakemake's own start-up before the first job).
    """
    rules = {}
    for rule, recs in by_rule.items():
        cpu = sum(r["cpu_s"] for r in recs)
        wall = sum(r["s"] for r in recs)
        rules[rule] = {
            "jobs": len(recs),
            "cpu_s": cpu,
            "mean_cpu_s": cpu / len(recs),
            "wall_s": wall,
            "max_wall_s": max(r["s"] for r in recs),
        }
    recs = [r for rs in by_rule.values() for r in rs]
    start = min(r["end"] - r["s"] for r in recs)
    end = max(r["end"] for r in recs)
    return {
        "rules": rules,
        "jobs": len(recs),
        "cpu_s": sum(r["cpu_s"] for r in recs),
        "wall_s": end - start,
    }


def format_summary(summary: dict, cores: int | None = None) -> str:
    lines = [
        f"{'rule':24s} {'jobs':>5s} {'cpu s':>9s} {'cpu s/job':>10s} {'wall s':>9s} "
        f"{'max wall':>9s}"
    ]
    for rule, r in sorted(summary["rules"].items(), key=lambda kv: -kv[1]["cpu_s"]):
        lines.append(
            f"{rule:24s} {r['jobs']:5d} {r['cpu_s']:9.1f} {r['mean_cpu_s']:10.2f} "
            f"{r['wall_s']:9.1f} {r['max_wall_s']:9.1f}"
        )
    lines.append(
        f"{'total':24s} {summary['jobs']:5d} {summary['cpu_s']:9.1f} {'':10s} {'':9s} {'':9s}"
    )
    wall = summary["wall_s"]
    lines.append(f"jobs' span (first start to last end): {wall:.1f} s = {wall / 60:.2f} min")
    if cores and wall > 0:
        lines.append(
            f"CPU of the jobs / ({cores} cores x span): {summary['cpu_s'] / (cores * wall):.0%}"
        )
    return "\n".join(lines)


def machine_cores() -> int:
    """The CPUs this process may run on (what ``snakemake --cores all`` uses)."""
    return len(os.sched_getaffinity(0))


def busy_cores(cores: int | str) -> int:
    """The cores a run with ``--cores`` can keep busy: at most the machine's."""
    return machine_cores() if cores == "all" else min(cores, machine_cores())


def parse_cores(text: str) -> int | str:
    """One ``--cores`` value: a positive integer or ``all``."""
    text = text.strip()
    if text == "all":
        return text
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"--cores takes positive integers or 'all', got {text!r}")
    return int(text)


def run_study(root, cores: int | str, extra: list[str]) -> float:
    """Run ``snakemake --cores N`` in ``root``; print the load average; return wall seconds."""
    print("load average before:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    t0 = time.perf_counter()
    subprocess.run(["snakemake", "--cores", str(cores), *extra], cwd=root, check=True)
    seconds = time.perf_counter() - t0
    print("load average after: ", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"snakemake wall time: {seconds:.1f} s = {seconds / 60:.2f} min")
    return seconds


#: the scenarios in the order run and their targets (issue "real studies at real scale"),
#: each a function of the run: see :func:`scenario_target`
SCENARIOS = ("rebuild", "no-op", "add a model", "add a calibrator", "template edit")
TEMPLATE = Path("src/calbench/templates/report/report.html.j2")
NEW_MODEL = """  bench_lenet5_seed1:
    dataset: fashion_mnist
    source: train
    arch: lenet5
    training: {loss: ce, loss_kwargs: {}, epochs: 20, batch_size: 128, lr: 0.05, schedule: cosine, seed: 1, train_subset: 5000}
    display: {name: LeNet-5 (seed 1)}
"""
NEW_CALIBRATOR = (
    "  bench_ts_f32: {method: ts, params: {precision: float32}, display: T-scaling (float32)}\n"
)


def copy_project(src, dst) -> None:
    """Copy the git-tracked files of ``src`` (working-tree content) into ``dst``."""
    import shutil

    files = (
        subprocess.run(["git", "ls-files", "-z"], cwd=src, check=True, capture_output=True)
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        source = Path(src) / rel
        if source.is_file():
            target = Path(dst) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def insert_after(path, header: str, text: str) -> None:
    """Insert ``text`` right after the line ``header`` of a YAML file (a new map entry)."""
    lines = Path(path).read_text().splitlines(keepends=True)
    at = lines.index(header + "\n") + 1
    Path(path).write_text("".join(lines[:at]) + text + "".join(lines[at:]))


def apply_edit(root, scenario: str) -> None:
    root = Path(root)
    if scenario == "add a model":
        insert_after(root / "config.yaml", "models:", NEW_MODEL)
    elif scenario == "add a calibrator":
        insert_after(root / "config.yaml", "calibrators:", NEW_CALIBRATOR)
    elif scenario == "template edit":
        with open(root / TEMPLATE, "a") as fh:
            fh.write("{# edited by perf/bench_workflow.py #}\n")


def jobs_since(root, t0: float) -> dict[str, list[dict]]:
    """``{rule: [benchmark records]}`` of the jobs whose benchmark file was written after ``t0``
    (wall-clock time): the jobs one scenario ran."""
    base = Path(root) / "benchmarks"
    if not base.is_dir():
        return {}
    recent = {rule: [r for r in recs if r["end"] >= t0] for rule, recs in collect(root).items()}
    return {rule: recs for rule, recs in recent.items() if recs}


def scenario_target(
    scenario: str, jobs: dict[str, list[dict]], cores: int | str, floor: float
) -> tuple[float, str]:
    """A scenario's target wall seconds and how it is derived, from the jobs it ran (``jobs``:
    :func:`jobs_since`) and Snakemake's own no-op (``floor``, :func:`snakemake_floor`):

    * rebuild: 1.25 x the CPU seconds of its trainings / the cores (training is the floor);
    * no-op: Snakemake's no-op of a one-rule workflow + 0.5 s;
    * add a model: its own training and logits jobs (wall) + 20 s;
    * add a calibrator: 30 s; template edit: 10 s (fixed).
    """
    if scenario == "rebuild":
        train = sum(r["cpu_s"] for r in jobs.get("train_model", []))
        n = busy_cores(cores)
        return 1.25 * train / n, f"1.25 x {train:.0f} CPU-s training / {n}"
    if scenario == "no-op":
        return floor + 0.5, f"Snakemake's one-rule no-op {floor:.2f} + 0.5"
    if scenario == "add a model":
        own = sum(r["s"] for rule in ("train_model", "cache_logits") for r in jobs.get(rule, []))
        return own + 20.0, f"its training + logits {own:.1f} + 20"
    return {"add a calibrator": 30.0, "template edit": 10.0}[scenario], "fixed"


def keep_models(root, n: int) -> None:
    """Keep the first ``n`` models of ``root/config.yaml`` (a reduced study, to try the
    scenarios quickly; the figures are then not the default study's)."""
    import yaml

    path = Path(root) / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    cfg["models"] = dict(list(cfg["models"].items())[:n])
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))


def run_scenarios(
    workdir, cores: int | str, extra: list[str], models: int | None = None, src=None
) -> list[dict]:
    """Copy the project into ``workdir`` and run every scenario of :data:`SCENARIOS` (with
    ``models``, only the first that many models of config.yaml; ``src``: the project, default
    the current folder); each row has the wall
    seconds, the jobs run and the target with its basis (:func:`scenario_target`)."""
    copy_project(src or Path.cwd(), workdir)
    if models is not None:
        keep_models(workdir, models)
    floor = snakemake_floor(cores)
    rows = []
    for scenario in SCENARIOS:
        apply_edit(workdir, scenario)
        t0 = time.time()
        wall = run_study(workdir, cores, extra)
        jobs = jobs_since(workdir, t0)
        target, basis = scenario_target(scenario, jobs, cores, floor)
        rows.append(
            {
                "scenario": scenario,
                "cores": cores,
                "wall_s": wall,
                "target_s": target,
                "basis": basis,
                "jobs": sum(map(len, jobs.values())),
                "rules": {rule: len(recs) for rule, recs in jobs.items()},
                "cpu_s": sum(r["cpu_s"] for recs in jobs.values() for r in recs),
            }
        )
        if scenario == "rebuild":
            rows[-1]["summary"] = summarize(collect(workdir))
    return rows


def snakemake_floor(cores: int | str, repeats: int = 3) -> float:
    """Best wall seconds of ``repeats`` no-op runs of a one-rule workflow in a scratch folder
    (with this environment's Snakemake and plugins): what a no-op costs before any of this
    workflow's own parsing, validation and DAG."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="calbench-floor-") as d:
        Path(d, "Snakefile").write_text(
            'rule a:\n    output: "a.txt"\n    shell: "touch {output}"\n'
        )
        cmd = ["snakemake", "--cores", str(cores), "--quiet"]
        subprocess.run(cmd, cwd=d, check=True, capture_output=True)
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            subprocess.run(cmd, cwd=d, check=True, capture_output=True)
            best = min(best, time.perf_counter() - t0)
    return best


def format_scenarios(rows: list[dict]) -> str:
    lines = [
        f"{'scenario':18s} {'cores':>5s} {'wall s':>8s} {'CPU s':>8s} {'target s':>9s} "
        f"{'met':>4s} {'jobs':>5s}  target basis; rules run"
    ]
    for r in rows:
        met = "yes" if r["wall_s"] <= r["target_s"] else "NO"
        rules = ", ".join(f"{k} {v}" for k, v in sorted(r["rules"].items()))
        lines.append(
            f"{r['scenario']:18s} {r['cores']!s:>5s} {r['wall_s']:8.1f} {r['cpu_s']:8.1f} "
            f"{r['target_s']:9.1f} {met:>4s} {r['jobs']:5d}  {r['basis']}; {rules}"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", default=".", help="folder the workflow ran in (default: .)")
    p.add_argument(
        "--cores",
        default="all",
        help="cores of the run (an integer or all); with --scenarios a list, e.g. all,8",
    )
    p.add_argument("--run", action="store_true", help="run snakemake in --root first")
    p.add_argument(
        "--scenarios", action="store_true", help="time the rebuild and everyday edits (see above)"
    )
    p.add_argument("--workdir", help="scratch folder for --scenarios (default: a new temp folder)")
    p.add_argument(
        "--models",
        type=int,
        default=None,
        help="with --scenarios: keep only the first N models of config.yaml (a quick "
        "try of the script; the figures are then not the default study's)",
    )
    p.add_argument("snakemake_args", nargs="*", help="extra snakemake arguments (with --run)")
    args = p.parse_args(argv)
    try:
        cores = [parse_cores(c) for c in str(args.cores).split(",") if c.strip()]
        if not cores:
            raise ValueError(f"--cores must list positive integers or 'all', got {args.cores!r}")
        if args.scenarios:
            import tempfile

            rows = []
            for n in cores:
                base = args.workdir or tempfile.mkdtemp(prefix="calbench-bench-")
                workdir = Path(base) / f"cores{n}"
                if workdir.exists():
                    raise ValueError(f"{workdir} exists; pass an empty --workdir")
                rows += run_scenarios(workdir, n, args.snakemake_args, args.models)
                print(format_summary(rows[-len(SCENARIOS)]["summary"], cores=busy_cores(n)))
            print(format_scenarios(rows))
            return 0
        if args.run:
            run_study(args.root, cores[0], args.snakemake_args)
        print(format_summary(summarize(collect(args.root)), cores=busy_cores(cores[0])))
    except ValueError as exc:
        print(f"bench_workflow: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
