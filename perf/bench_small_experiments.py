"""Per-model cost of a study of many small experiments, and where it goes.

A folder of M small predictions files (``logits_folder:``, the two-line config of README.md's
"Your own predictions") is run through the whole workflow for each size N x K (default
1,000 x 2 and 2,000 x 10, M = 4 models each, the default calibrators). Printed per size:

* the run's wall time, per model, and the mean wall time of each rule's jobs (Snakemake's
  ``benchmarks/<rule>/...tsv``, column ``s``);
* one ``calibrate`` job taken apart (a batch of small models, workflow/rules/helpers/sizing.smk,
  when the study's models are small enough: its figures are also printed per model): the same command rerun in a fresh process under
  ``python -X importtime`` (the imports' total), then once more in that process, warm, with
  timers around the work: **start-up** (the fresh job's wall less the warm rerun's: the
  interpreter, imports, first-call costs), **fitting** (every calibrator's outermost ``fit``,
  the cross-fitted selection's refits included), **metrics** (``evaluate_rows``: metrics and
  bootstrap intervals), **diagrams** (the reliability diagrams and the grid) and **other**
  (the rest of the verb: reading, paired tests, ranks, file writes).

With ``--imports-only`` the run stops after the import step (every model's logits file is the
target) and prints that step's cost: the run's wall time and CPU time (Snakemake and every job),
and its import jobs' count, summed wall time (their benchmark files) and summed CPU time (the
``calbench import-logits: ... CPU-s`` line each job's log ends with). ``--workflow DIR`` runs
another checkout's Snakefile and library (e.g. the code before a change) with this script.

The goal (issue "Bring the predictions you already have"): fixed overhead (imports, diagrams,
files) below the fitting work, and small jobs grouped. This script measures; it sets no target.

    python perf/bench_small_experiments.py                       # both sizes, M = 4
    python perf/bench_small_experiments.py --sizes 1000x2 --models 8 --cores 2
    python perf/bench_small_experiments.py --calibrators uncalibrated,ts,iso
    python perf/bench_small_experiments.py --sizes 500x2 --models 100 --no-job   # 100 tiny models
    python perf/bench_small_experiments.py --sizes 1000x2 --models 8 --per-calibrator  # + a PNG each
    python perf/bench_small_experiments.py --sizes 500x2 --models 100 --imports-only  # the import step
    python perf/bench_small_experiments.py --sizes 500x2 --models 100 --imports-only --workflow ../main
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- the job, in-process


def _profile_job(argv: list[str]) -> None:
    """Run ``calbench <argv>`` with timers around fitting, metrics and diagrams; print JSON."""
    t_start = time.perf_counter()
    from calbench import protocol, steps
    from calbench.calibrators import REGISTRY
    from calbench.cli import main

    totals = {"fitting": 0.0, "metrics": 0.0, "diagrams": 0.0}
    depth = {"n": 0}

    def timed(fn, key):
        def wrapper(*a, **k):
            if depth["n"]:
                return fn(*a, **k)  # nested in another timed call: counted there
            depth["n"] += 1
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                totals[key] += time.perf_counter() - t0
                depth["n"] -= 1

        return wrapper

    for cls in {c for c in REGISTRY.values() if isinstance(c, type)}:
        for klass in cls.__mro__:
            if "fit" in klass.__dict__ and not getattr(klass.fit, "_timed", False):
                wrapped = timed(klass.__dict__["fit"], "fitting")
                wrapped._timed = True
                klass.fit = wrapped
    for mod in (protocol, steps):  # each module's own name for the function, where it has one
        for name, key in (("evaluate_rows", "metrics"), ("draw", "diagrams")):
            if hasattr(mod, name):
                setattr(mod, name, timed(getattr(mod, name), key))
    out = {"setup_s": time.perf_counter() - t_start}
    for run, args in (("cold", argv), ("warm", [a.replace("/again/", "/again2/") for a in argv])):
        for key in totals:
            totals[key] = 0.0
        t0 = time.perf_counter()
        if main(args) != 0:
            raise SystemExit(f"calbench {' '.join(args)} failed")
        out[run] = {"verb_s": time.perf_counter() - t0, **totals}
    print(json.dumps(out))


def _import_seconds(stderr: str) -> float:
    """Sum of the ``self`` column of ``python -X importtime`` (microseconds) in seconds."""
    total = 0
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+(\d+)\s+\|", line)
        if m:
            total += int(m.group(1))
    return total / 1e6


# --------------------------------------------------------------------------- the study


def _write_study(
    root: Path, n: int, k: int, models: int, calibrators: str | None, per_calibrator: bool = False
) -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, k, n)
    (root / "preds").mkdir(parents=True)
    for i in range(models):
        # over-confident by a factor 1 to 4 (model i: 1 + i mod 4): the confidence of trained
        # networks; a factor growing with i (100 for model 99) made logits so large that most
        # scaling fits diverged and were refitted, timing the guard instead of the study
        z = (1.0 + i % 4) * (rng.normal(size=(n, k)) + 1.5 * np.eye(k)[y])
        np.savez(root / "preds" / f"model{i}.npz", logits=z.astype(np.float32), labels=y)
    text = f"logits_folder: preds\nstudy: {{title: {n} x {k}}}\n"
    if calibrators:
        text += "calibrators: {" + ", ".join(f"{c}: {{}}" for c in calibrators.split(",")) + "}\n"
    if per_calibrator:  # a folder study draws each model's grid alone unless it asks
        text += "plots: {per_calibrator: true}\n"
    (root / "study.yaml").write_text(text)


def _benchmarks(root: Path) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for path in sorted((root / "benchmarks").rglob("*.tsv")):
        rule = path.relative_to(root / "benchmarks").parts[0]
        with open(path, newline="") as fh:
            row = next(csv.DictReader(fh, delimiter="\t"))
        out.setdefault(rule, []).append(float(row["s"]))
    return out


def _means(rules: dict[str, list[float]]) -> dict[str, tuple[int, float]]:
    """Jobs and mean wall time per rule; the batches of every size as one rule."""
    merged: dict[str, list[float]] = {}
    for rule, walls in rules.items():
        merged.setdefault(rule, []).extend(walls)
    return {r: (len(v), sum(v) / len(v)) for r, v in merged.items()}


def _count_values(argv: list[str], flag: str) -> int:
    """How many values ``flag`` has in ``argv``."""
    i = argv.index(flag) + 1
    j = next((k for k in range(i, len(argv)) if argv[k].startswith("--")), len(argv))
    return j - i


def _calibrate_command(root: Path) -> list[str]:
    """The argv of the first calibrate job (one model's, or a batch's), from Snakemake's log."""
    log = max((root / ".snakemake" / "log").glob("*.log"), key=os.path.getmtime)
    text = log.read_text()
    m = re.search(r"calbench calibrate (.*?) > logs/", text.replace("\n", " "))
    if m is None:  # the shell command is not in the log: rebuild it from the outputs
        raise RuntimeError("no calibrate command in Snakemake's log; run with --printshellcmds")
    return ["calibrate", *m.group(1).split()]


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's finished children."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _import_costs(root: Path) -> dict:
    """The import step's jobs (rules import_logits*, batches included): their count, summed wall
    time (benchmark files) and summed CPU time (each log's closing resource line)."""
    walls = [w for rule, ws in _benchmarks(root).items() if rule.startswith("import_logits")
             for w in ws]  # fmt: skip
    cpu = 0.0
    for log in sorted((root / "logs").rglob("*.log")):
        if log.relative_to(root / "logs").parts[0].startswith("import_logits"):
            m = re.search(r"calbench import-logits: ([\d.]+) CPU-s", log.read_text())
            if m is None:
                raise SystemExit(f"{log}: no resource line")
            cpu += float(m.group(1))
    return {"jobs": len(walls), "wall": sum(walls), "cpu": cpu}


def run_size(
    n: int,
    k: int,
    models: int,
    cores: int,
    calibrators: str | None,
    env: dict,
    no_job: bool,
    per_calibrator: bool = False,
    imports_only: bool = False,
    workflow: Path = REPO,
) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"calbench_small_{n}x{k}_") as tmp:
        root = Path(tmp)
        _write_study(root, n, k, models, calibrators, per_calibrator)
        cmd = ["snakemake", "-s", str(workflow / "Snakefile"), "--cores", str(cores),
               "--configfile", "study.yaml", "--printshellcmds"]  # fmt: skip
        if imports_only:  # every model's logits: the import step alone
            cmd += [f"results/logits/preds/model{i}.npz" for i in range(models)]
        cpu0 = _children_cpu()
        t0 = time.perf_counter()
        res = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        cpu = _children_cpu() - cpu0
        if res.returncode != 0:
            raise SystemExit(res.stdout[-3000:] + res.stderr[-3000:])
        rules = _benchmarks(root)
        if no_job or imports_only:
            return {"size": f"{n} x {k}", "models": models, "wall": wall, "cpu": cpu,
                    "rules": _means(rules), "imports": _import_costs(root)}  # fmt: skip
        argv = _calibrate_command(root)
        batch = _count_values(argv, "--logits")  # models of that job (a batch of small ones)
        # the same job again, into scratch folders (the reuse cache left out: a full refit)
        redirect = {"--calibrators-dir", "--metrics-dir", "--plots-dir", "--compare",
                    "--robustness", "--reuse-dir"}  # fmt: skip
        flag = None
        for i, a in enumerate(argv):
            if a.startswith("--"):
                flag, j = a, 0
            elif flag in redirect:
                argv[i] = str(root / "again" / flag.strip("-") / str(j))
                j += 1
        job_env = {**env, "OMP_NUM_THREADS": "1"}
        t0 = time.perf_counter()
        prof = subprocess.run(
            [sys.executable, "-X", "importtime", __file__, "--profile-job", *argv],
            cwd=root, env=job_env, capture_output=True, text=True,
        )  # fmt: skip
        job_wall = time.perf_counter() - t0
        if prof.returncode != 0:
            raise SystemExit(prof.stdout[-2000:] + prof.stderr[-2000:])
        parts = json.loads(prof.stdout.strip().splitlines()[-1])
        warm = parts["warm"]
        # the same verb a second time in the same process: the work without imports and
        # first-call costs; what the cold process spent beyond it is start-up
        single = job_wall - warm["verb_s"]  # the fresh process as the workflow runs it
        startup = single - warm["verb_s"]
        return {
            "size": f"{n} x {k}",
            "models": models,
            "wall": wall,
            "rules": _means(rules),
            "batch": batch,
            "job_wall": single,
            "imports": _import_seconds(prof.stderr),
            "startup": startup,
            "fitting": warm["fitting"],
            "metrics": warm["metrics"],
            "diagrams": warm["diagrams"],
            "other": warm["verb_s"] - warm["fitting"] - warm["metrics"] - warm["diagrams"],
        }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--profile-job":
        _profile_job(sys.argv[2:])
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000x2,2000x10", help="N x K per study, comma-separated")
    p.add_argument("--models", type=int, default=4, help="models per study (default 4)")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--calibrators", default=None, help="comma-separated (default: config.yaml's)")
    p.add_argument(
        "--no-job", action="store_true", help="the workflow's wall time only (no job taken apart)"
    )
    p.add_argument(
        "--per-calibrator",
        action="store_true",
        help="plots.per_calibrator: true (a PNG per calibrator besides each model's grid; a "
        "folder study draws the grid alone by default)",
    )
    p.add_argument(
        "--imports-only",
        action="store_true",
        help="run the import step alone (every model's logits file) and print its cost",
    )
    p.add_argument(
        "--workflow",
        type=Path,
        default=REPO,
        help="checkout whose Snakefile and src/ to run (default: this one)",
    )
    args = p.parse_args()
    workflow = args.workflow.resolve()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(workflow / "src"), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    for size in args.sizes.split(","):
        n, k = (int(x) for x in size.lower().split("x"))
        r = run_size(
            n, k, args.models, args.cores, args.calibrators, env, args.no_job, args.per_calibrator,
            args.imports_only, workflow,
        )  # fmt: skip
        print(f"\n== {r['size']}: {r['models']} models, --cores {args.cores}, {workflow} ==")
        print(f"workflow wall {r['wall']:.1f} s, {r['wall'] / r['models']:.1f} s per model")
        if "cpu" in r:
            imp = r["imports"]
            print(
                f"  run CPU {r['cpu']:.1f} s (Snakemake and every job); import step: "
                f"{imp['jobs']} jobs, {imp['wall']:.1f} s wall and {imp['cpu']:.1f} CPU-s summed "
                f"over them, {imp['cpu'] / r['models']:.2f} CPU-s per model"
            )
        for rule, (count, mean) in sorted(r["rules"].items()):
            print(f"  {rule:<16} {count:>3} jobs, mean wall {mean:6.2f} s")
        if "batch" not in r:
            continue
        b = r["batch"]
        print(
            f"one calibrate job of {b} model{'s' * (b > 1)}: {r['job_wall']:.2f} s wall in a "
            f"fresh process (imports {r['imports']:.2f} s of it), {r['job_wall'] / b:.2f} s per "
            "model; the same job again in that process (total, per model):"
        )
        print(
            f"  {'start-up':<9} {r['startup']:6.2f} s {r['startup'] / b:6.2f} s  (fresh job's "
            "wall - the warm rerun's)"
        )
        for key in ("fitting", "metrics", "diagrams", "other"):
            print(f"  {key:<9} {r[key]:6.2f} s {r[key] / b:6.2f} s")
        fixed = r["startup"] + r["diagrams"]
        verdict = "below" if fixed < r["fitting"] else "ABOVE"
        print(f"  fixed overhead (start-up + diagrams) {fixed:.2f} s: {verdict} the fitting work")
        print(
            f"  start-up alone {r['startup']:.2f} s: "
            f"{'below' if r['startup'] < r['fitting'] else 'ABOVE'} the fitting work"
        )


if __name__ == "__main__":
    main()
