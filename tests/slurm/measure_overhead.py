"""Per-job SLURM overhead of the tiny workflow, ungrouped vs grouped (prints figures).

Run by hand as root on a machine where tests/slurm/cluster.sh can start the cluster:

    python tests/slurm/measure_overhead.py            # starts and stops its own cluster

For each variant (profiles/slurm without its groups, and as shipped) it runs config/test.yaml
from scratch (downloads and training done beforehand by a local run and copied in, so both
variants submit the same calibration and report jobs) and prints, from `scontrol show job`:
the number of SLURM jobs, the mean time from submission to completion per SLURM job, the mean
work inside them (the rules' benchmark files), the overhead per SLURM job and per workflow job,
and the run's wall time.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import test_slurm_cluster as t  # noqa: E402

#: Produced locally first and copied into every variant (the GPU stage is not measured).
STAGED = ("resources", "results/models", "results/logits", "results/split")


def _when(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def _work_seconds(workdir: Path) -> float:
    total = 0.0
    for tsv in (workdir / "benchmarks").rglob("*.tsv"):
        with tsv.open() as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        total += sum(float(r["s"]) for r in rows)
    return total


def measure(name: str, profile: dict, root: Path, staged: Path) -> None:
    import yaml

    prof_dir = root / f"profile_{name}"
    prof_dir.mkdir()
    (prof_dir / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    workdir = root / name
    for rel in STAGED:
        shutil.copytree(staged / rel, workdir / rel, symlinks=True)
    start = time.monotonic()
    proc = t.run_snakemake(workdir, *t.profile_args(prof_dir))
    wall = time.monotonic() - start
    if proc.returncode != 0:
        print(f"{name}: run failed\n{t._fail_text(proc)}")
        return
    submitted = {int(j) for j in t.SUBMITTED.findall(proc.stdout + proc.stderr)}
    jobs = t.slurm_jobs(workdir)
    spans = [_when(jobs[j]["EndTime"]) - _when(jobs[j]["SubmitTime"]) for j in submitted]
    waits = [_when(jobs[j]["StartTime"]) - _when(jobs[j]["SubmitTime"]) for j in submitted]
    n_rules = len(list((workdir / "benchmarks").rglob("*.tsv")))
    work = _work_seconds(workdir)
    overhead = sum(spans) - work
    print(
        f"{name:>10}: {len(submitted):3d} SLURM jobs for {n_rules:3d} workflow jobs | "
        f"submit->end {sum(spans) / len(spans):5.1f} s/SLURM job "
        f"(queue {sum(waits) / len(waits):4.1f} s) | work {work / len(spans):5.1f} s/SLURM job | "
        f"overhead {overhead / len(spans):5.1f} s/SLURM job = {overhead / n_rules:4.1f} s/workflow job"
        f" | wall {wall:5.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, default=t.BASE, help="cluster scratch directory")
    args = parser.parse_args()
    import yaml

    root = Path(tempfile.mkdtemp(prefix="calbench-slurm-measure-"))
    staged = root / "staged"
    staged.mkdir()
    print(f"staging downloads, training and logits with a local run in {staged} ...")
    proc = t.run_snakemake(staged, "--cores", "2", "--until", "split")
    if proc.returncode != 0:
        sys.exit(f"local staging run failed:\n{t._fail_text(proc)}")

    subprocess.run([str(t.CLUSTER), "stop", str(args.base)], check=False)
    shutil.rmtree(args.base, ignore_errors=True)
    args.base.mkdir(parents=True)
    args.base.chmod(0o755)
    subprocess.run([str(t.CLUSTER), "start", str(args.base)], check=True)
    try:
        grouped = yaml.safe_load(t.site_profile(root / "site").joinpath("config.yaml").read_text())
        ungrouped = {k: v for k, v in grouped.items() if k not in ("groups", "group-components")}
        measure("ungrouped", ungrouped, root, staged)
        measure("grouped", grouped, root, staged)
    finally:
        subprocess.run([str(t.CLUSTER), "stop", str(args.base)], check=False)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
