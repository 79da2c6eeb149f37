"""Per-rule CPU totals and the wall time of a workflow run, from Snakemake's benchmark files.

Every rule writes ``benchmarks/<rule>/....tsv`` (Snakemake's ``benchmark:`` directive: one header
line and one row with ``s`` = the job's wall seconds and ``cpu_time`` = CPU seconds of the job's
process tree). This script reads them from a finished run and prints, per rule, the number of
jobs, their total and mean CPU seconds, total and largest wall seconds; then the run's wall time
(first job start = file time - ``s``, to the last job's end) and how busy the cores were.

    python benchmarks/bench_workflow.py                  # the run in this folder
    python benchmarks/bench_workflow.py --root /tmp/run  # another run's folder
    python benchmarks/bench_workflow.py --run --cores 2  # rebuild here first (deletes nothing:
                                                         # use `snakemake --delete-all-output`)

Only the figures are printed; no speed target is asserted here.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
from pathlib import Path


def read_benchmark(path) -> dict:
    """One benchmark file -> ``{"rule", "s", "cpu_s", "end"}`` (``end``: the file's mtime)."""
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

    return {"s": num("s"), "cpu_s": num("cpu_time"), "end": path.stat().st_mtime}


def collect(root) -> dict[str, list[dict]]:
    """``{rule: [benchmark records]}`` for every ``<root>/benchmarks/<rule>/**/*.tsv``."""
    base = Path(root) / "benchmarks"
    if not base.is_dir():
        raise ValueError(f"{base} does not exist; pass --root the folder a workflow ran in")
    out: dict[str, list[dict]] = {}
    for rule_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        recs = [read_benchmark(f) for f in sorted(rule_dir.rglob("*.tsv"))]
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


def run_study(root, cores: int, extra: list[str]) -> float:
    """Run ``snakemake --cores N`` in ``root``; print the load average; return wall seconds."""
    print("load average before:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    t0 = time.perf_counter()
    subprocess.run(["snakemake", "--cores", str(cores), *extra], cwd=root, check=True)
    seconds = time.perf_counter() - t0
    print("load average after: ", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"snakemake wall time: {seconds:.1f} s = {seconds / 60:.2f} min")
    return seconds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", default=".", help="folder the workflow ran in (default: .)")
    p.add_argument("--cores", type=int, default=2, help="cores of the run (default 2)")
    p.add_argument("--run", action="store_true", help="run snakemake in --root first")
    p.add_argument("snakemake_args", nargs="*", help="extra snakemake arguments (with --run)")
    args = p.parse_args(argv)
    try:
        if args.run:
            run_study(args.root, args.cores, args.snakemake_args)
        print(format_summary(summarize(collect(args.root)), cores=args.cores))
    except ValueError as exc:
        print(f"bench_workflow: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
