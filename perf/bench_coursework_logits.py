"""config/coursework_logits.yaml on this machine, with synthetic logits of the real shapes.

The published files cannot be downloaded here, so files of their shapes and formats stand in:
10k x 10 (33 CIFAR-10 models), 10k x 100 (35 CIFAR-100), 10k x 200 (5 Tiny ImageNet) and
50k x 1000 (4 ImageNet). For one model of each shape the script runs that model's jobs exactly
as the workflow's rules do, each in its own process: `calbench import-logits`, `split` and the
one `calbench calibrate` job (every calibrator fitted, evaluated, drawn and compared; rule
calibrate's shell line, one thread), and prints each job's wall seconds, CPU seconds and peak
memory (RSS). The ImageNet M-scaling-b fit is a 1000 x 1000 matrix fitted by LBFGS for up to
1000 iterations: the job runs with it capped at --ms-iters iterations, and the rest is
extrapolated from its CPU seconds per iteration. The 77 models' total and the makespan at 2 and
16 cores are then simulated from the measured job costs (greedy longest-first scheduling), with
one thread per calibrate job (the rule) and with threads sized by N x K
(workflow/rules/helpers/sizing.smk); last, every target of the issue "real studies at real
scale" is printed next to its measured figure (the default study's with --targets).
With --baseline OTHER/src the calibrate jobs also run on another checkout's library
(before/after). The default config's calibrators are also run on the 100-class model.

    python perf/bench_coursework_logits.py                     # every shape, targets at the end
    python perf/bench_coursework_logits.py --shapes cifar10,cifar100 --no-import   # reduced
    python perf/bench_coursework_logits.py --import-only       # the 200 MB import only
    python perf/bench_coursework_logits.py --workflow --models-per-shape 1   # through snakemake
    python perf/bench_coursework_logits.py --workflow --models-per-shape 1 --targets  # all targets

``--workflow`` runs the study as a user does, end to end: it writes the synthetic files in the
published layout into a local folder (the config's ``mirrors:``), copies the project into a
scratch folder and runs ``snakemake --cores N replication --configfile <the config>`` there
(``--models-per-shape`` keeps that many models of each dataset, ``--shapes`` those datasets),
then prints per rule the jobs' CPU seconds and peak memory (each job's own log line) and wall
seconds (Snakemake's benchmark files). ImageNet models run apart: (1) ``snakemake
replication`` on the other models, then (2) the ImageNet models' jobs up to their calibrate job,
with M-scaling-b capped at --ms-iters LBFGS iterations (a spec of its own, so nothing of run 1
reruns) and the rest of the 1000 iterations added from the CPU seconds of one iteration. The
extrapolation to the config's 77 models is explicit: per dataset, models x (the measured
import_logits + calibrate job) + its split job, plus the once-per-study rules; the makespans at
2 and 16 cores are simulated from those job costs (:func:`extrapolate`).

``--targets`` also runs the default study's scenarios (``perf/bench_workflow.py --scenarios
--cores 2``: rebuild, no-op, add a model, add a calibrator, template edit, each against its
target) and ends with one table: every target of the issue beside its measured figure.

How long (CPU-bound, 2 cores): ``--shapes cifar10,cifar100 --no-import`` about 1 min;
``--workflow --models-per-shape 1 --shapes cifar10,cifar100`` about 1 min (75 s wall under
load); adding ``tiny_imagenet`` about 1 more; ``imagenet`` several minutes and GBs of memory
(run one such job at a time, niced); ``--targets`` adds the default study's scenarios, about
7 min on an idle machine (``--study-models 1``: about 4 min, figures not the default study's).

Separately, the import of a 200 MB ImageNet file is measured in both published formats
(coursework .pt with synthesised class-order targets; Kängsepp pickle of 25k + 25k rows).
Only figures are printed; no target is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
SHAPES = {  # name: (N, K, models in the config)
    "cifar10": (10000, 10, 33),
    "cifar100": (10000, 100, 35),
    "tiny_imagenet": (10000, 200, 5),
    "imagenet": (50000, 1000, 4),
}


def run(cmd: list[str], env: dict | None = None) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MB) of one command in its own
    process. Measured by GNU time around the command: the RSS a child reports through wait4()
    would include the pages of this (large) process it was forked from before exec. CPU seconds
    are what the extrapolation uses: on a machine shared with other work they grow far less
    than wall seconds."""
    full = ["/usr/bin/time", "-f", "BENCH %e %U %S %M", *cmd]
    res = subprocess.run(full, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} failed:\n{res.stdout[-1500:]}{res.stderr[-1500:]}")
    tail = [ln for ln in res.stderr.splitlines() if ln.startswith("BENCH ")]
    _, secs, user, system, kb = tail[-1].split()
    return float(secs), float(user) + float(system), float(kb) / 1024.0


def synthetic(n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Overconfident logits: the true class gets a boost, then everything is scaled by 2.5."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.standard_normal((n, k), dtype=np.float32)
    z[np.arange(n), y] += 2.5
    z *= 2.5
    return z, y


def write_pt(path: Path, z: np.ndarray) -> None:
    import torch

    torch.save(torch.from_numpy(z), path)


def calbench(*args) -> list[str]:
    return [sys.executable, "-m", "calbench", *map(str, args)]


def bench_import(work: Path) -> list[tuple[str, float, float, float]]:
    """The 200 MB ImageNet import in both formats: (label, MB, seconds, peak RSS MB)."""
    n, k, _ = SHAPES["imagenet"]
    z, y = synthetic(n, k, 1)
    rows = []
    pt = work / "in" / "imagenet" / "vgg19_bn.pt"
    pt.parent.mkdir(parents=True, exist_ok=True)
    write_pt(pt, z)
    spec = {
        "dataset": "imagenet",
        "source": "logits",
        "logits": {
            "format": "coursework",
            "folder": "imagenet",
            "file": "vgg19_bn.pt",
            "targets": "class_blocks",
            "local_path": str(pt),
        },
    }
    wall, _, rss = run(
        calbench(
            "import-logits",
            "--spec",
            json.dumps(spec),
            "--out",
            work / "imp" / "in_vgg19_bn.npz",
            "--resources",
            work / "res",
        )
    )
    rows.append(("coursework .pt 50000 x 1000", pt.stat().st_size / 1e6, wall, rss))
    kp = work / "in" / "probs_resnet152_imgnet_logits.p"
    with open(kp, "wb") as fh:
        pickle.dump([(z[:25000], y[:25000, None]), (z[25000:], y[25000:, None])], fh, protocol=3)
    import hashlib

    sha = hashlib.sha256(kp.read_bytes()).hexdigest()
    spec = {
        "dataset": "imagenet",
        "source": "logits",
        "logits": {
            "format": "kull_pickle",
            "file": kp.name,
            "sha256": sha,
            "size": kp.stat().st_size,
            "local_path": str(kp),
        },
    }
    wall, _, rss = run(
        calbench(
            "import-logits",
            "--spec",
            json.dumps(spec),
            "--out",
            work / "imp" / "k.npz",
            "--split-out",
            work / "imp" / "ks.npz",
            "--resources",
            work / "res",
        )
    )
    rows.append(
        ("kull_pickle 25000 + 25000 x 1000 (sha256 checked)", kp.stat().st_size / 1e6, wall, rss)
    )
    return rows


def load_config(path) -> dict:
    """A config as the workflow sees it: the schema's defaults filled in."""
    from snakemake.utils import validate

    cfg = yaml.safe_load(Path(path).read_text())
    validate(cfg, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    return cfg


def spec_of(cfg: dict, **override) -> dict:
    """The calibrate job's spec from a validated config, as the workflow writes it
    (:meth:`calbench.protocol.CalibrateSpec.from_config`); ``override``: {calibrator: extra
    params}."""
    from calbench.protocol import CalibrateSpec

    spec = CalibrateSpec.from_config(cfg).to_dict()
    for c, extra in override.items():
        spec["calibrators"][c]["params"] = {**spec["calibrators"][c]["params"], **extra}
    return spec


def sizing():
    """The workflow's job-sizing functions (workflow/rules/helpers/sizing.smk), on a machine
    without a GPU (GPUS = 0)."""
    ns: dict = {"GPUS": 0}
    path = REPO / "workflow" / "rules" / "helpers" / "sizing.smk"
    exec(compile(path.read_text(), str(path), "exec"), ns)
    return ns


def calibrate_threads(n: int, k: int, cores: int | None = None) -> int:
    """Threads rule calibrate gives a job on N x K logits in a local run with ``--cores cores``
    (sizing.smk's calibrate_threads, no GPU; ``None``: a cluster), without a file: the shape
    is given."""
    ns = sizing()
    ns["logits_shape"] = lambda path: (n, k)
    if cores is not None:
        ns["workflow"] = SimpleNamespace(
            local_exec=True, remote_exec=False, global_resources={"_cores": cores}
        )
    return ns["calibrate_threads"](None, SimpleNamespace(logits="(given)"))


def calibrate_job(
    d: Path,
    spec: dict,
    threads: int = 1,
    src: str | None = None,
    env: dict | None = None,
    files: tuple[Path, Path] | None = None,
) -> tuple[float, float, float]:
    """One `calbench calibrate` job as rule calibrate runs it (its shell line), in its own
    process, on ``d``'s logits.npz and split.npz (or ``files``: other logits and split files;
    outputs under ``d``): (wall s, CPU s, peak RSS MB). ``src``: another library tree
    (PYTHONPATH), for a before/after comparison."""
    logits, split = files or (d / "logits.npz", d / "split.npz")
    tag = f"{abs(hash(json.dumps(spec, sort_keys=True)))}_{threads}_{bool(src)}"
    out = d / f"job_{tag}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / "spec.json").write_text(json.dumps(spec))
    # the rule's environment: one OMP thread (--threads sizes the fits), malloc's reuse
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **sizing()["CALIBRATE_ENV"], **(env or {})}
    if src:
        full_env["PYTHONPATH"] = src
    cmd = calbench(
        "calibrate",
        "--logits",
        logits,
        "--split",
        split,
        "--spec",
        f"@{out / 'spec.json'}",
        "--threads",
        threads,
        "--calibrators-dir",
        out / "cal",
        "--metrics-dir",
        out / "met",
        "--plots-dir",
        out / "plot",
        "--compare",
        out / "compare.csv",
        "--robustness",
        out / "robustness.csv",
    )
    return run(cmd, env=full_env)


def prepare_model(work: Path, name: str) -> tuple[Path, dict]:
    """One synthetic model of shape ``name`` imported and split as the workflow does:
    (folder, {job: (wall s, CPU s, peak MB)}) for import_logits and split."""
    n, k, _ = SHAPES[name]
    z, y = synthetic(n, k, 2)
    d = work / name
    (d / "in").mkdir(parents=True, exist_ok=True)
    write_pt(d / "in" / "m.pt", z)
    (d / "in" / "targets.txt").write_text("\n".join(map(str, y)))
    spec = {
        "dataset": name,
        "source": "logits",
        "logits": {"format": "coursework", "file": "m.pt", "local_path": str(d / "in")},
    }
    out = {}
    out["import_logits"] = run(
        calbench(
            "import-logits",
            "--spec",
            json.dumps(spec),
            "--out",
            d / "logits.npz",
            "--resources",
            d / "res",
        )
    )
    out["split"] = run(calbench("split", "--logits", d / "logits.npz", "--out", d / "split.npz"))
    return d, out


def ms_b_per_iteration(logits: Path, split: Path, iters: int) -> float:
    """CPU seconds per LBFGS iteration of M-scaling-b on the validation half of ``logits``
    (one thread): two fits of ``iters`` and ``2 * iters`` iterations, differenced."""
    code = (
        "import sys, time, warnings; warnings.simplefilter('ignore')\n"
        "from calbench.split import load_halves\n"
        "from calbench.calibrators import get_calibrator\n"
        "z, y = load_halves(sys.argv[1], sys.argv[2])['val']\n"
        "for it in (int(sys.argv[3]), 2 * int(sys.argv[3])):\n"
        "    t = time.process_time()\n"
        "    get_calibrator('ms_b', device='cpu', max_iter=it, precision='float32').fit(z, y)\n"
        "    print('CPU', time.process_time() - t)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(logits), str(split), str(iters)],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", **sizing()["CALIBRATE_ENV"]},
    )
    if res.returncode != 0:
        raise SystemExit(f"ms_b timing failed:\n{res.stderr[-1500:]}")
    a, b = (float(ln.split()[1]) for ln in res.stdout.splitlines() if ln.startswith("CPU"))
    return max(b - a, 0.0) / iters


#: share of an M-scaling-b LBFGS evaluation on 25k x 1000 logits that runs on the job's threads
#: (the data term's matrix products, forward and backward, ~1.65 of ~1.89 CPU-s on one thread;
#: the optimiser's vector arithmetic stays on one: calbench.calibrators.fit_threads,
#: perf/bench_fit_threads.py)
MS_B_PARALLEL = 0.87


def job_seconds(cpu: float, threads: int, parallel: float = 1.0) -> float:
    """Wall seconds of a job of ``cpu`` CPU seconds on ``threads`` cores when the share
    ``parallel`` of its work runs on all of them and the rest on one (Amdahl)."""
    return cpu * (1.0 - parallel) + cpu * parallel / threads


def makespan(jobs: list[tuple], cores: int) -> float:
    """Wall seconds of independent jobs on ``cores`` cores, list-scheduled as Snakemake's
    scheduler places them: longest first, and whenever cores free up every waiting job that
    fits starts (a later, smaller job fills cores a wide job cannot use yet). A job is ``(CPU s,
    threads)`` or ``(CPU s, threads, parallel share)``: it holds ``t = min(threads, cores)``
    cores for :func:`job_seconds` (parallel share 1 unless given: ideal scaling)."""
    import heapq

    pending = sorted(jobs, key=lambda j: -j[0])
    free, now = cores, 0.0
    running: list[tuple[float, int]] = []
    while pending:
        waiting = []
        for job in pending:
            t = min(job[1], cores)
            if t <= free:
                heapq.heappush(running, (now + job_seconds(job[0], t, *job[2:]), t))
                free -= t
            else:
                waiting.append(job)
        pending = waiting
        if pending:
            now, held = heapq.heappop(running)
            free += held
    return max([now, *(end for end, _ in running)])


def write_mirror(cfg: dict, mirror: Path) -> dict[str, int]:
    """The config's coursework files, synthetic, in the published layout under ``mirror``:
    ``<folder>/<file>`` (a torch-saved float32 [N, K] tensor) and one ``targets.txt`` per folder
    (none for a folder read with ``targets: class_blocks``). Returns {dataset: files}."""
    import torch

    labels: dict[str, np.ndarray] = {}  # one test set per dataset, whatever the folder
    counts: dict[str, int] = {}
    for i, entry in enumerate(cfg["models"].values()):
        src, dataset = entry["logits"], entry["dataset"]
        n, k, _ = SHAPES[dataset]
        folder = mirror / src.get("folder", "")
        folder.mkdir(parents=True, exist_ok=True)
        if dataset not in labels:
            if src.get("targets") == "class_blocks":
                labels[dataset] = np.repeat(np.arange(k), n // k)
            else:
                labels[dataset] = np.random.default_rng(len(labels)).integers(0, k, n)
        y = labels[dataset]
        if src.get("targets") != "class_blocks" and not (folder / "targets.txt").exists():
            (folder / "targets.txt").write_text("\n".join(map(str, y)))
        rng = np.random.default_rng(1000 + i)
        z = rng.standard_normal((n, k), dtype=np.float32)
        z[np.arange(n), y] += 2.5
        z *= 2.5
        torch.save(torch.from_numpy(z), folder / src["file"])
        counts[entry["dataset"]] = counts.get(entry["dataset"], 0) + 1
    return counts


#: the rules run once per model (their cost is multiplied by the models of the dataset)
PER_MODEL = ("import_logits", "calibrate")


def bench_workflow(
    work: Path,
    config: Path,
    cores: int,
    ms_iters: int,
    per_shape: int | None = None,
    shapes=tuple(SHAPES),
) -> dict:
    """The study end to end through snakemake (module docstring, ``--workflow``); with
    ``per_shape``, only that many models of each dataset (a reduced run). Prints the per-rule
    table, the extrapolation to every model of the config and the simulated makespans; returns
    :func:`extrapolate`'s figures for the targets."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_workflow import collect, copy_project, run_study

    full_cfg = yaml.safe_load(config.read_text())
    cfg = yaml.safe_load(config.read_text())
    cfg["models"] = {m: e for m, e in cfg["models"].items() if e["dataset"] in shapes}
    if per_shape is not None:
        seen: dict[str, int] = {}
        keep = {}
        for m, e in cfg["models"].items():
            if seen.get(e["dataset"], 0) < per_shape:
                keep[m] = e
                seen[e["dataset"]] = seen.get(e["dataset"], 0) + 1
        cfg["models"] = keep
    mirror = work / "mirror"
    print(f"writing the {len(cfg['models'])} synthetic files into {mirror} ...", flush=True)
    print("files per dataset:", write_mirror(cfg, mirror))
    project = work / "project"
    copy_project(REPO, project)
    cfg["mirrors"] = [str(mirror)]
    bench_cfg = project / "config" / "bench_coursework_logits.yaml"
    bench_cfg.write_text(yaml.safe_dump(cfg, sort_keys=False))
    big = [m for m, e in cfg["models"].items() if e["dataset"] == "imagenet"]
    os.environ["PYTHONPATH"] = str(project / "src")  # the copy's library, as installed code
    quiet = ["--quiet", "rules"]
    first = second = 0.0
    if len(big) < len(cfg["models"]):  # run 1: the study without its ImageNet models
        small = {**cfg, "models": {m: e for m, e in cfg["models"].items() if m not in big}}
        bench_cfg.write_text(yaml.safe_dump(small, sort_keys=False))
        print(
            f"\n## run 1: the {len(small['models'])} models other than ImageNet's, "
            "`snakemake replication`"
        )
        first = run_study(project, cores, ["replication", "--configfile", str(bench_cfg), *quiet])
    if big:  # run 2: the ImageNet models' jobs, M-scaling-b capped
        capped = json.loads(json.dumps(cfg))
        capped["calibrators"]["ms_b"].setdefault("params", {})["max_iter"] = ms_iters
        bench_cfg.write_text(yaml.safe_dump(capped, sort_keys=False))
        print(
            f"\n## run 2: the {len(big)} ImageNet models' jobs up to their calibrate job, "
            f"M-scaling-b capped at {ms_iters} LBFGS iterations"
        )
        targets = [f"results/compare/imagenet/{m}.csv" for m in big]
        second = run_study(project, cores, [*targets, "--configfile", str(bench_cfg), *quiet])
    by_rule = {**collect(project), **logged_only(project, collect(project))}
    print(
        "\n## per rule: CPU s and peak MB from each job's own log line (calbench.cli."
        "resource_line), wall s from Snakemake's benchmark files"
    )
    print("\n".join(per_rule_table(by_rule)))
    total = first + second
    print(
        f"measured: snakemake wall {total:.0f} s = {total / 60:.1f} min on {cores} cores for "
        f"{len(cfg['models'])} models"
        + (f" (ImageNet M-scaling-b capped at {ms_iters} iterations)" if big else "")
    )
    ms_extra = {}
    for m in big:  # the capped fits' missing iterations, from the CPU of one iteration
        split = next((project / "results" / "split" / "imagenet").glob("*.npz"))
        per_iter = ms_b_per_iteration(
            project / "results" / "logits" / "imagenet" / f"{m}.npz", split, ms_iters
        )
        ms_extra[m] = (1000 - ms_iters) * per_iter
        print(
            f"ms_b on {m}: {per_iter:.2f} CPU-s per LBFGS iteration (one thread): up to 1000 "
            f"iterations add {ms_extra[m]:.0f} CPU-s to its calibrate job"
        )
    return extrapolate(full_cfg, by_rule, ms_extra)


def logged_only(project: Path, by_rule: dict) -> dict[str, list[dict]]:
    """Jobs of rules with a log but no benchmark file (e.g. reference_csv, replication_tables):
    their CPU and peak memory from the log's last line, no wall seconds."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_workflow import logged_resources

    out: dict[str, list[dict]] = {}
    logs = project / "logs"
    for log in sorted(logs.rglob("*.log")) if logs.is_dir() else []:
        rule = log.relative_to(logs).parts[0]
        found = logged_resources(log)
        if rule not in by_rule and found is not None:
            job = log.relative_to(logs / rule).with_suffix("").as_posix()
            out.setdefault(rule, []).append(
                {"job": job, "cpu_s": found[0], "peak_mb": found[1], "s": float("nan")}
            )
    return out


def per_rule_table(by_rule: dict[str, list[dict]]) -> list[str]:
    """Per rule: jobs, CPU s, wall s (sum and largest job) and the largest job's peak MB."""
    lines = [
        f"  {'rule':24s} {'jobs':>5s} {'CPU s':>9s} {'wall s':>9s} {'max job wall':>12s} "
        f"{'peak MB':>8s}"
    ]

    def num(values, width, digits=1):
        values = [v for v in values if v == v]  # no wall seconds: a rule without benchmark file
        return f"{'-':>{width}s}" if not values else f"{sum(values):{width}.{digits}f}"

    for rule, recs in sorted(by_rule.items()):
        walls = [r["s"] for r in recs]
        lines.append(
            f"  {rule:24s} {len(recs):5d} {num([r['cpu_s'] for r in recs], 9)} "
            f"{num(walls, 9)} {num([max(walls)], 12)} "
            f"{num([max(r.get('peak_mb', 0.0) for r in recs)], 8, 0)}"
        )
    return lines


def extrapolate(full_cfg: dict, by_rule: dict[str, list[dict]], ms_extra: dict) -> dict:
    """Every model of the full config from the measured jobs: per dataset, models x (mean CPU of
    its measured import_logits + calibrate jobs) + its split job; the rules run once per study
    (aggregate, tables, report) as measured on the reduced study (they grow with the models, but
    are seconds). The makespan at 2 and 16 cores is simulated (:func:`makespan`, one thread per
    job, except calibrate jobs on their sized threads (:func:`calibrate_threads`) with
    M-scaling-b's matrix products (:data:`MS_B_PARALLEL` of its extrapolated CPU) on all of
    them): the per-model jobs of each stage (import and split, then calibrate) list-scheduled
    one stage after the other, then the once-per-study rules one after another. Prints the sums; returns ``{"span": {cores: s}, "full": bool, "models": n, "how":
    str, "cifar10": CPU s of a CIFAR-10 calibrate job}`` (the figures the targets read)."""
    counts: dict[str, int] = {}
    for e in full_cfg["models"].values():
        counts[e["dataset"]] = counts.get(e["dataset"], 0) + 1
    cost: dict[str, dict[str, float]] = {}
    threaded: dict[str, list[float]] = {}  # CPU s of each calibrate job on its threads
    for rule in (*PER_MODEL, "split"):
        for r in by_rule.get(rule, []):
            dataset, _, model = r["job"].partition("/")
            cpu = r["cpu_s"] + ms_extra.get(model, 0.0) if rule == "calibrate" else r["cpu_s"]
            cost.setdefault(dataset, {}).setdefault(rule, []).append(cpu)
            if rule == "calibrate":
                threaded.setdefault(dataset, []).append(MS_B_PARALLEL * ms_extra.get(model, 0.0))
    once = {
        rule: sum(r["cpu_s"] for r in recs)
        for rule, recs in by_rule.items()
        if rule not in (*PER_MODEL, "split")
    }
    print(
        f"\n## The config's {sum(counts.values())} models from the measured job costs "
        "(CPU s; threads of the calibrate jobs as workflow/rules/helpers/sizing.smk sizes them)"
    )
    total = 0.0
    stage1: list[tuple[float, int]] = []
    stage2: dict[int, list[tuple]] = {c: [] for c in (2, 16)}
    covered = 0
    for dataset, n in counts.items():
        c = cost.get(dataset)
        if not c or not all(c.get(rule) for rule in (*PER_MODEL, "split")):
            print(f"  {dataset:14s} {n:3d} models: not measured (--shapes)")
            continue
        mean = {rule: float(np.mean(v)) for rule, v in c.items()}
        sub = n * (mean["import_logits"] + mean["calibrate"]) + mean["split"]
        total += sub
        covered += n
        stage1 += [(mean["import_logits"], 1)] * n + [(mean["split"], 1)]
        share = float(np.mean(threaded[dataset])) / mean["calibrate"]
        threads = {}
        for c in stage2:
            threads[c] = calibrate_threads(*SHAPES[dataset][:2], c) if dataset in SHAPES else 1
            stage2[c] += [(mean["calibrate"], threads[c], share)] * n
        print(
            f"  {dataset:14s} {n:3d} models x ({mean['import_logits']:6.2f} import_logits + "
            f"{mean['calibrate']:8.2f} calibrate) + {mean['split']:5.2f} split "
            f"= {sub:8.0f} CPU-s; calibrate threads at --cores 2 / 16: {threads[2]} / "
            f"{threads[16]}" + (f" ({share:.0%} of its CPU on them)" if share else "")
        )
    tail = sum(once.values())
    print(
        f"  once per study ({', '.join(sorted(once))}): {tail:.1f} CPU-s "
        "(measured on the reduced study)"
    )
    total += tail
    full = covered == sum(counts.values())
    print(
        f"  total {total:.0f} CPU-s = {total / 60:.1f} CPU-min for {covered} of "
        f"{sum(counts.values())} models" + ("" if full else " (the shapes measured only)")
    )
    span = {c: makespan(stage1, c) + makespan(stage2[c], c) + tail for c in (2, 16)}
    for c, s in span.items():
        print(
            f"  makespan on {c:2d} cores (simulated from the job costs): {s:7.0f} s = "
            f"{s / 60:5.1f} min" + ("" if full else f" for those {covered} models")
        )
    fig = {
        "span": span,
        "full": full,
        "models": covered,
        "how": "simulated from the workflow's jobs",
    }
    if cost.get("cifar10", {}).get("calibrate"):  # the rule's own job, coursework calibrators
        fig["cifar10"] = float(np.mean(cost["cifar10"]["calibrate"]))
    return fig


def bench_jobs(args, cfg: dict, work: Path) -> dict:
    """One model of each shape, its jobs run as the rules run them (module docstring); prints
    them and the extrapolation; returns the figures the targets read: ``{"span": {cores: s},
    "full": bool, "cifar10": CPU s, "default@100": CPU s}``."""
    print("\n## Process start-up (every workflow job is one process)")
    for label, code in (
        ("python + numpy + calbench CLI", "import calbench.cli; import numpy"),
        ("+ torch (torch-based fits)", "import calbench.cli, torch"),
        ("+ matplotlib (plots)", "import calbench.cli, matplotlib.pyplot"),
    ):
        wall, cpu, rss = run([sys.executable, "-c", code])
        print(f"{label:40s} {wall:7.2f} s wall {cpu:7.2f} CPU-s  peak RSS {rss:6.0f} MB")
    per_shape: dict[str, dict] = {}
    fig: dict = {}
    for name in args.shapes.split(","):
        n, k, count = SHAPES[name]
        print(
            f"\n## {name}: one model's jobs as the workflow runs them, {n} x {k} logits "
            f"({count} such models)"
        )
        d, jobs = prepare_model(work, name)
        override = {"ms_b": {"max_iter": args.ms_iters}} if name == "imagenet" else {}
        label = "calibrate" + (f" (ms_b capped at {args.ms_iters} iterations)" if override else "")
        jobs[label] = calibrate_job(d, spec_of(cfg, **override))
        if args.baseline:
            jobs[label + ", baseline"] = calibrate_job(
                d, spec_of(cfg, **override), src=args.baseline
            )
        for job, (wall, cpu, rss) in jobs.items():
            print(f"{job:58s} {wall:7.2f} s wall {cpu:7.2f} CPU-s  peak RSS {rss:6.0f} MB")
        calib, extra = jobs[label][1], 0.0
        if override:
            per_iter = ms_b_per_iteration(d / "logits.npz", d / "split.npz", args.ms_iters)
            extra = (1000 - args.ms_iters) * per_iter
            print(
                f"ms_b: {per_iter:.2f} CPU-s per LBFGS iteration (one thread): at most "
                f"1000 iterations add up to {extra:.0f} CPU-s to the job"
            )
            calib += extra
        per_shape[name] = {
            "import": jobs["import_logits"][1],
            "split": jobs["split"][1],
            "calibrate": calib,
            "count": count,
            "threads": {c: calibrate_threads(*SHAPES[name][:2], c) for c in (2, 16)},
            "share": MS_B_PARALLEL * extra / calib,
        }
        fig[name] = jobs[label][1]
        if name == "cifar100":
            fig["default@100"] = default_on_100(args, d)
    print(
        f"\n## The {sum(v['count'] for v in per_shape.values())} models from the measured "
        "jobs (aggregate, tables and report: seconds, not included)"
    )
    total = 0.0
    jobs_1: list[tuple] = []
    jobs_sized: dict[int, list[tuple]] = {2: [], 16: []}
    for name, v in per_shape.items():
        sub = v["count"] * (v["import"] + v["calibrate"]) + v["split"]
        total += sub
        print(
            f"{name:14s} {v['count']:3d} models x ({v['import']:6.1f} import + "
            f"{v['calibrate']:8.1f} calibrate) CPU-s + split = {sub:8.0f} CPU-s; "
            f"calibrate threads at --cores 2 / 16: {v['threads'][2]} / {v['threads'][16]}"
        )
        for _ in range(v["count"]):
            jobs_1 += [(v["import"], 1), (v["calibrate"], 1)]
            for c in jobs_sized:
                jobs_sized[c] += [(v["import"], 1), (v["calibrate"], v["threads"][c], v["share"])]
    print(f"total {total:.0f} CPU-s = {total / 60:.0f} CPU-min")
    span = {c: makespan(jobs_1, c) for c in (2, 16)}
    span_sized = {c: makespan(jobs_sized[c], c) for c in (2, 16)}
    for c in (2, 16):
        print(
            f"makespan on {c:2d} cores (simulated from the job costs, list-scheduled): "
            f"{span_sized[c] / 60:6.1f} min with threads sized by N x K (the rule; M-scaling-b's "
            f"matrix products on them), {span[c] / 60:6.1f} min with one thread per job"
        )
    fig.update(
        span=span_sized,
        full=set(per_shape) == set(SHAPES),
        models=sum(v["count"] for v in per_shape.values()),
    )
    return fig


def default_on_100(args, d: Path, files: tuple[Path, Path] | None = None) -> float | None:
    """CPU seconds of the calibrate job with the default config's spec (--default-config) on a
    100-class model (``d`` or ``files``); also on --baseline's library. None without the config."""
    if not Path(args.default_config).is_file():
        return None
    spec = spec_of(load_config(args.default_config))
    runs = {"calibrate with the default config (config.yaml)": None}
    if args.baseline:
        runs["calibrate with the default config, baseline"] = args.baseline
    first = None
    for what, src in runs.items():
        wall, cpu, rss = calibrate_job(d, spec, src=src, files=files)
        first = cpu if first is None else first
        print(f"{what:58s} {wall:7.2f} s wall {cpu:7.2f} CPU-s  peak RSS {rss:6.0f} MB")
    return first


def target_line(what: str, measured: str, target: str, ok: bool | None) -> str:
    verdict = "n/a" if ok is None else ("met" if ok else "NOT met")
    return f"  {what:44s} {measured:>14s}   target {target:60s} {verdict}"


def print_targets(fig: dict, rows: list[dict] | None) -> None:
    """Every target of the issue "real studies at real scale" beside its measured figure:
    ``fig`` from :func:`bench_jobs` or :func:`bench_workflow`, ``rows`` from
    ``bench_workflow.run_scenarios`` (None: not run; ``--targets`` runs them)."""
    print(
        "\n## Targets (issue 'real studies at real scale'); "
        f"load average now {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    span, full = fig.get("span", {}), fig.get("full", False)
    how = fig.get("how", "simulated from the measured jobs")
    for c, limit in ((2, 45), (16, 10)):
        measured = f"{span[c] / 60:.1f} min" if c in span else "-"
        note = how if full else f"{fig.get('models', 0)} models only: the shapes measured"
        print(
            target_line(
                f"coursework from logits, {c} cores",
                measured,
                f"<= {limit} min ({note})",
                span[c] <= limit * 60 if full else None,
            )
        )
    for key, what, limit in (
        ("cifar10", "CIFAR-10-shaped calibrate job, coursework", 3),
        ("default@100", "default config on a 100-class model", 25),
    ):
        value = fig.get(key)
        print(
            target_line(
                what,
                "-" if value is None else f"{value:.2f} CPU-s",
                f"<= {limit} CPU-s",
                None if value is None else value <= limit,
            )
        )
    names = {
        "rebuild": "default study rebuild",
        "no-op": "no-op",
        "add a model": "add a model",
        "add a calibrator": "add a calibrator",
        "template edit": "report template edit",
    }
    for r in rows or []:
        print(
            target_line(
                f"{names[r['scenario']]}, --cores {r['cores']}",
                f"{r['wall_s']:.1f} s",
                f"<= {r['target_s']:.1f} s = {r['basis']}",
                r["wall_s"] <= r["target_s"],
            )
        )
    if rows is None:
        print(
            target_line(
                "default study's scenarios",
                "-",
                "--targets (perf/bench_workflow.py --scenarios)",
                None,
            )
        )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(REPO / "config" / "coursework_logits.yaml"))
    p.add_argument(
        "--default-config",
        default=str(REPO / "config.yaml"),
        help="its calibrators, evaluation and comparisons on one 100-class model",
    )
    p.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated subset")
    p.add_argument(
        "--ms-iters", type=int, default=5, help="LBFGS iterations of the timed ImageNet ms_b fit"
    )
    p.add_argument("--cores", type=int, default=2, help="cores the workflow would use")
    p.add_argument(
        "--baseline",
        default=None,
        help="another checkout's src/ folder: its calibrate jobs are run too (before/after)",
    )
    p.add_argument("--import-only", action="store_true")
    p.add_argument("--no-import", action="store_true", help="skip the 200 MB import timing")
    p.add_argument(
        "--workflow",
        action="store_true",
        help="run the study end to end through snakemake (see above)",
    )
    p.add_argument(
        "--models-per-shape",
        type=int,
        default=None,
        help="with --workflow: only this many models of each shape (a reduced run)",
    )
    p.add_argument(
        "--targets",
        action="store_true",
        help="also run the default study's scenarios (perf/bench_workflow.py "
        "--scenarios, --cores 2) and print every target in one table",
    )
    p.add_argument(
        "--study-models",
        type=int,
        default=None,
        help="with --targets: keep the first N models of the default study (a quick "
        "try; the figures are then not the default study's)",
    )
    p.add_argument("--keep", default=None, help="work folder to keep (default: a temporary one)")
    args = p.parse_args(argv)
    cfg = load_config(args.config)
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_cl_"))
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    env_note = f"{os.cpu_count()} CPUs, load average {load}"
    print(f"# coursework_logits benchmark ({env_note}); work folder {work}")
    print("# CPU seconds are the steadier figure on a shared machine; wall seconds grow with load")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        if args.workflow:
            fig = bench_workflow(
                work,
                Path(args.config),
                args.cores,
                args.ms_iters,
                args.models_per_shape,
                args.shapes.split(","),
            )
            project = work / "project"
            c100 = sorted((project / "results" / "logits" / "cifar100").glob("*.npz"))
            if c100:  # the default config's calibrate job on the study's own 100-class logits
                split = next((project / "results" / "split" / "cifar100").glob("*.npz"))
                fig["default@100"] = default_on_100(args, work / "default100", (c100[0], split))
        else:
            if not args.no_import:
                print(
                    "\n## Import of a 200 MB ImageNet logits file "
                    "(calbench import-logits, own process)"
                )
                for label, mb, wall, rss in bench_import(work):
                    print(f"{label:52s} {mb:7.1f} MB  {wall:6.2f} s  peak RSS {rss:6.0f} MB")
            if args.import_only:
                return 0
            fig = bench_jobs(args, cfg, work)
        rows = None
        if args.targets:
            sys.path.insert(0, str(Path(__file__).parent))
            from bench_workflow import format_scenarios, format_summary, run_scenarios

            print(
                "\n## The default study's scenarios (perf/bench_workflow.py --scenarios "
                "--cores 2)"
                + (f", first {args.study_models} models only" if args.study_models else "")
            )
            rows = run_scenarios(
                work / "study", 2, ["--quiet", "rules"], args.study_models, src=REPO
            )
            print(format_summary(rows[0]["summary"], cores=2))  # the rebuild, per rule
            print(format_scenarios(rows))
        print_targets(fig, rows)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
