"""Shared by the end-to-end workflow tests: a scratch copy of the workflow that runs on this
tree's library, and the job counts of a dry run. Each test keeps its own ``smk`` (their
environments differ: fixed dates, plug-in paths, time limits, each built on ``workflow_env``)."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def copy_workflow(dest: Path, config: Path | None = REPO / "config" / "test.yaml") -> Path:
    """``dest`` (created) holding the Snakefile, workflow/, profiles/default, config/, envs/,
    ``config`` as config.yaml (``None``: none) and the library as lib/calbench (the test puts
    lib/ first on PYTHONPATH)."""
    dest.mkdir(parents=True)
    shutil.copy2(REPO / "Snakefile", dest / "Snakefile")
    for sub in ("workflow", "profiles/default", "config", "envs"):
        shutil.copytree(REPO / sub, dest / sub, ignore=shutil.ignore_patterns("__pycache__"))
    if config is not None:
        shutil.copy2(config, dest / "config.yaml")
    shutil.copytree(
        REPO / "src" / "calbench", dest / "lib" / "calbench",
        ignore=shutil.ignore_patterns("__pycache__"),
    )  # fmt: skip
    return dest


def workflow_env(root: Path) -> dict[str, str]:
    """The environment a test's Snakemake run gets: this process's, with the copy's lib/ first on
    PYTHONPATH, no bytecode written into the copy, and this interpreter's bin/ first on PATH (the
    ``calbench`` of the test's virtual environment). Tests add their own settings to it."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "lib"), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def job_counts(output: str) -> dict[str, int]:
    """Job counts per rule from the table a ``snakemake -n --quiet rules`` run prints (``{}``
    when nothing is to be done)."""
    counts = {}
    for line in output.splitlines():
        m = re.match(r"^\s*([a-z][a-z0-9_]*)\s+(\d+)\s*$", line)
        if m and m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts
