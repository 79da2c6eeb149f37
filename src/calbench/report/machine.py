"""The machine and the duration of a run, for the report's provenance
(:func:`calbench.report.provenance.run_provenance`): :func:`hardware` (CPU model, cores, GPUs,
without starting a subprocess or importing torch) and :func:`wall_time` (elapsed and summed job
time from Snakemake's ``benchmarks/`` files; its docstring says how it is measured)."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path


def hardware() -> dict:
    """The machine that renders the report: ``{"cpu": model, "cores": n, "gpus": [names]}``.

    The CPU model is read from ``/proc/cpuinfo`` (Linux; else :func:`platform.processor`), the
    cores are :func:`os.cpu_count` (logical cores). GPUs come from torch only when torch is
    already imported (this step never imports it for that), else from the NVIDIA driver's
    ``/proc/driver/nvidia/gpus/*/information`` files; no subprocess (nvidia-smi) is run."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                cpu = value.strip()
                break
    except OSError:
        pass
    cpu = " ".join((cpu or platform.processor() or platform.machine() or "unknown").split())
    gpus: list[str] = []
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception:  # a broken driver must not break the report
        gpus = []
    if not gpus:
        for info in sorted(Path("/proc/driver/nvidia/gpus").glob("*/information")):
            try:
                for line in info.read_text(errors="replace").splitlines():
                    if line.startswith("Model:"):
                        gpus.append(line.split(":", 1)[1].strip())
            except OSError:
                continue
    return {"cpu": cpu, "cores": os.cpu_count() or 0, "gpus": gpus}


def wall_time(benchmarks_dir: str | os.PathLike | None, env: Mapping[str, str] | None = None) -> dict:
    """The run's duration from Snakemake's benchmark files (``benchmarks/<rule>/....tsv``).

    How it is measured: Snakemake writes one TSV per job when the job ends, holding the job's
    wall-clock seconds (column ``s``). A job ran from ``mtime - s`` to ``mtime``; the run's
    **elapsed** time is the latest end minus the earliest start over every file, and its **job
    time** the sum of ``s`` (larger than elapsed when jobs ran side by side). The render job
    itself is not included (its file is written after it ends), and a study built over several
    invocations counts from the first job of the earliest one still on disk. Returns
    ``{"elapsed_s", "job_s", "jobs"}``, or ``{"note": why not}`` without files or when
    ``SOURCE_DATE_EPOCH`` is set (clock readings differ between two otherwise identical runs,
    and a reproducible report must not)."""
    env = os.environ if env is None else env
    if env.get("SOURCE_DATE_EPOCH"):
        return {"note": "left out: SOURCE_DATE_EPOCH is set (a reproducible report holds no clock readings)"}
    if not benchmarks_dir or not Path(benchmarks_dir).is_dir():
        return {"note": "not recorded (no benchmarks/ folder)"}
    starts, ends, total = [], [], 0.0
    for path in sorted(Path(benchmarks_dir).rglob("*.tsv")):
        try:
            header, row = path.read_text().splitlines()[:2]
            seconds = float(row.split("\t")[header.split("\t").index("s")])
            end = path.stat().st_mtime
        except (OSError, ValueError):
            continue  # a half-written or foreign file: not a job's timing
        if not seconds >= 0:
            continue
        starts.append(end - seconds)
        ends.append(end)
        total += seconds
    if not ends:
        return {"note": f"not recorded (no job timings in {Path(benchmarks_dir).name})"}
    return {"elapsed_s": round(max(ends) - min(starts), 1), "job_s": round(total, 1), "jobs": len(ends)}


def duration(seconds: float) -> str:
    """``h:mm:ss`` of ``seconds``."""
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
