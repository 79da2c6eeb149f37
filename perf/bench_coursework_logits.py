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
scale" is printed next to its measured figure (the workflow targets: perf/bench_workflow.py).
With --baseline OTHER/src the calibrate jobs also run on another checkout's library
(before/after). The default config's calibrators are also run on the 100-class model.

    python perf/bench_coursework_logits.py                     # every shape, targets at the end
    python perf/bench_coursework_logits.py --shapes cifar10,cifar100 --no-import   # reduced
    python perf/bench_coursework_logits.py --import-only       # the 200 MB import only
    python perf/bench_coursework_logits.py --workflow --models-per-shape 1   # through snakemake

``--workflow`` runs the study as a user does, end to end: it writes the synthetic files in the
published layout into a local folder (the config's ``mirrors:``), copies the project into a
scratch folder and runs ``snakemake --cores N replication --configfile <the config>`` there
(``--models-per-shape`` keeps that many models of each dataset), then prints per rule the jobs'
CPU seconds, wall seconds and peak memory from Snakemake's benchmark files. With ImageNet
models it runs twice: (1) everything except their calibrate jobs (``--omit-from``), then (2)
those jobs with M-scaling-b capped at --ms-iters LBFGS iterations (the cap changes the
calibrators' spec, so run 2 uses ``--rerun-triggers mtime input``).

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
        "logits": {"format": "coursework", "folder": "imagenet", "file": "vgg19_bn.pt",
                   "targets": "class_blocks", "local_path": str(pt)},
    }
    wall, _, rss = run(calbench("import-logits", "--spec", json.dumps(spec), "--out",
                                work / "imp" / "in_vgg19_bn.npz", "--resources", work / "res"))
    rows.append(("coursework .pt 50000 x 1000", pt.stat().st_size / 1e6, wall, rss))
    kp = work / "in" / "probs_resnet152_imgnet_logits.p"
    with open(kp, "wb") as fh:
        pickle.dump([(z[:25000], y[:25000, None]), (z[25000:], y[25000:, None])], fh, protocol=3)
    import hashlib

    sha = hashlib.sha256(kp.read_bytes()).hexdigest()
    spec = {
        "dataset": "imagenet",
        "source": "logits",
        "logits": {"format": "kull_pickle", "file": kp.name, "sha256": sha,
                   "size": kp.stat().st_size, "local_path": str(kp)},
    }
    wall, _, rss = run(calbench("import-logits", "--spec", json.dumps(spec), "--out",
                                work / "imp" / "k.npz", "--split-out", work / "imp" / "ks.npz",
                                "--resources", work / "res"))
    rows.append(("kull_pickle 25000 + 25000 x 1000 (sha256 checked)", kp.stat().st_size / 1e6, wall, rss))
    return rows


def load_config(path) -> dict:
    """A config as the workflow sees it: the schema's defaults filled in."""
    from snakemake.utils import validate

    cfg = yaml.safe_load(Path(path).read_text())
    validate(cfg, str(REPO / "workflow" / "schemas" / "config.schema.yaml"))
    return cfg


def spec_of(cfg: dict, **override) -> dict:
    """The calibrate job's spec from a validated config, as the workflow writes it
    (:func:`calbench.calibrate_spec.calibrate_spec`); ``override``: {calibrator: extra params}."""
    from calbench.calibrate_spec import calibrate_spec

    spec = calibrate_spec(cfg)
    for c, extra in override.items():
        spec["calibrators"][c]["params"] = {**spec["calibrators"][c]["params"], **extra}
    return spec


def sizing():
    """The workflow's job-sizing functions (workflow/rules/helpers/sizing.smk)."""
    ns: dict = {}
    path = REPO / "workflow" / "rules" / "helpers" / "sizing.smk"
    exec(compile(path.read_text(), str(path), "exec"), ns)
    return ns


def calibrate_job(d: Path, spec: dict, threads: int = 1, src: str | None = None,
                  env: dict | None = None) -> tuple[float, float, float]:
    """One `calbench calibrate` job as rule calibrate runs it (its shell line), in its own
    process: (wall s, CPU s, peak RSS MB). ``src``: another library tree (PYTHONPATH), for a
    before/after comparison."""
    tag = f"{abs(hash(json.dumps(spec, sort_keys=True)))}_{threads}_{bool(src)}"
    out = d / f"job_{tag}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / "spec.json").write_text(json.dumps(spec))
    full_env = {**os.environ, "OMP_NUM_THREADS": str(threads), **(env or {})}
    if src:
        full_env["PYTHONPATH"] = src
    cmd = calbench("calibrate", "--logits", d / "logits.npz", "--split", d / "split.npz",
                   "--spec", f"@{out / 'spec.json'}", "--threads", threads,
                   "--calibrators-dir", out / "cal", "--metrics-dir", out / "met",
                   "--plots-dir", out / "plot", "--compare", out / "compare.csv",
                   "--robustness", out / "robustness.csv")
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
    spec = {"dataset": name, "source": "logits",
            "logits": {"format": "coursework", "file": "m.pt", "local_path": str(d / "in")}}
    out = {}
    out["import_logits"] = run(calbench("import-logits", "--spec", json.dumps(spec), "--out",
                                        d / "logits.npz", "--resources", d / "res"))
    out["split"] = run(calbench("split", "--logits", d / "logits.npz", "--out", d / "split.npz"))
    return d, out


def ms_b_per_iteration(d: Path, iters: int) -> float:
    """CPU seconds per LBFGS iteration of M-scaling-b on the validation half of ``d``'s logits
    (one thread): two fits of ``iters`` and ``2 * iters`` iterations, differenced."""
    code = (
        "import sys, time, warnings; warnings.simplefilter('ignore')\n"
        "from calbench.evaluation import load_halves\n"
        "from calbench.calibrators import get_calibrator\n"
        "z, y = load_halves(sys.argv[1], sys.argv[2])['val']\n"
        "for it in (int(sys.argv[3]), 2 * int(sys.argv[3])):\n"
        "    t = time.process_time()\n"
        "    get_calibrator('ms_b', device='cpu', max_iter=it, precision='float32').fit(z, y)\n"
        "    print('CPU', time.process_time() - t)\n"
    )
    res = subprocess.run([sys.executable, "-c", code, str(d / "logits.npz"),
                          str(d / "split.npz"), str(iters)], capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    if res.returncode != 0:
        raise SystemExit(f"ms_b timing failed:\n{res.stderr[-1500:]}")
    a, b = (float(ln.split()[1]) for ln in res.stdout.splitlines() if ln.startswith("CPU"))
    return max(b - a, 0.0) / iters


def makespan(jobs: list[tuple[float, int]], cores: int) -> float:
    """Wall seconds of independent jobs ``(CPU s, threads)`` on ``cores`` cores, greedy
    longest-first as a list scheduler would place them; a job of ``t`` threads (capped at
    ``cores``) holds ``t`` cores for ``CPU / t`` seconds (ideal scaling: a lower bound for t > 1)."""
    import heapq

    free = cores
    now = 0.0
    running: list[tuple[float, int]] = []
    for cpu, threads in sorted(jobs, key=lambda j: -j[0]):
        t = min(threads, cores)
        while free < t:
            end, held = heapq.heappop(running)
            now = max(now, end)
            free += held
        heapq.heappush(running, (now + cpu / t, t))
        free -= t
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


def bench_workflow(work: Path, config: Path, cores: int, ms_iters: int,
                   per_shape: int | None = None) -> None:
    """The study end to end through snakemake (module docstring, ``--workflow``); with
    ``per_shape``, only that many models of each dataset (a reduced run)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_workflow import copy_project, run_study

    cfg = yaml.safe_load(config.read_text())
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
    base = ["replication", "--configfile", str(bench_cfg), "--quiet", "rules"]
    first = 0.0
    if big:  # the ImageNet calibrate jobs (ms_b) come last, capped
        omit = [f"results/calibrators/imagenet/{m}/ms_b.json" for m in big]
        print(f"\n## run 1: everything but the {len(big)} ImageNet calibrate jobs")
        first = run_study(project, cores, [*base, "--omit-from", *omit])
        cfg["calibrators"]["ms_b"].setdefault("params", {})["max_iter"] = ms_iters
        bench_cfg.write_text(yaml.safe_dump(cfg, sort_keys=False))
        print(f"\n## run 2: those jobs, M-scaling-b capped at {ms_iters} LBFGS iterations")
        base += ["--rerun-triggers", "mtime", "input"]
    second = run_study(project, cores, base)
    print("\nper rule, from Snakemake's benchmark files:")
    print("\n".join(per_rule_table(project)))
    total = first + second
    print(f"\nwall {total:.0f} s = {total / 60:.1f} min on {cores} cores for "
          f"{len(cfg['models'])} models" + (f" (ImageNet M-scaling-b capped at {ms_iters} "
                                            "iterations)" if big else ""))


def per_rule_table(project: Path) -> list[str]:
    """Per rule, from Snakemake's benchmark files: jobs, CPU s (the job's own CPU line where
    its log has one), wall s, peak RSS MB (largest job)."""
    import csv

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_workflow import collect

    rss: dict[str, float] = {}
    for f in (project / "benchmarks").rglob("*.tsv"):
        rule = f.relative_to(project / "benchmarks").parts[0]
        with open(f, newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        try:
            rss[rule] = max(rss.get(rule, 0.0), float(rows[-1].get("max_rss", "nan")))
        except (ValueError, IndexError):
            pass
    lines = [f"  {'rule':24s} {'jobs':>5s} {'CPU s':>9s} {'wall s':>9s} {'max job wall':>12s} "
             f"{'peak MB':>8s}"]
    for rule, recs in sorted(collect(project).items()):
        lines.append(f"  {rule:24s} {len(recs):5d} {sum(r['cpu_s'] for r in recs):9.1f} "
                     f"{sum(r['s'] for r in recs):9.1f} {max(r['s'] for r in recs):12.1f} "
                     f"{rss.get(rule, float('nan')):8.0f}")
    return lines


def target_line(what: str, measured: str, target: str, ok: bool | None) -> str:
    verdict = "n/a" if ok is None else ("met" if ok else "NOT met")
    return f"  {what:52s} {measured:>22s}   target {target:14s} {verdict}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(REPO / "config" / "coursework_logits.yaml"))
    p.add_argument("--default-config", default=str(REPO / "config.yaml"),
                   help="its calibrators, evaluation and comparisons on one 100-class model")
    p.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated subset")
    p.add_argument("--ms-iters", type=int, default=5, help="LBFGS iterations of the timed ImageNet ms_b fit")
    p.add_argument("--cores", type=int, default=2, help="cores the workflow would use")
    p.add_argument("--baseline", default=None,
                   help="another checkout's src/ folder: its calibrate jobs are run too (before/after)")
    p.add_argument("--import-only", action="store_true")
    p.add_argument("--no-import", action="store_true", help="skip the 200 MB import timing")
    p.add_argument("--workflow", action="store_true",
                   help="run the study end to end through snakemake (see above)")
    p.add_argument("--models-per-shape", type=int, default=None,
                   help="with --workflow: only this many models of each shape (a reduced run)")
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
            bench_workflow(work, Path(args.config), args.cores, args.ms_iters,
                           args.models_per_shape)
            return 0
        if not args.no_import:
            print("\n## Import of a 200 MB ImageNet logits file (calbench import-logits, own process)")
            for label, mb, wall, rss in bench_import(work):
                print(f"{label:52s} {mb:7.1f} MB  {wall:6.2f} s  peak RSS {rss:6.0f} MB")
        if args.import_only:
            return 0
        print("\n## Process start-up (every workflow job is one process)")
        for label, code in (("python + numpy + calbench CLI", "import calbench.cli; import numpy"),
                            ("+ torch (torch-based fits)", "import calbench.cli, torch"),
                            ("+ matplotlib (plots)", "import calbench.cli, matplotlib.pyplot")):
            wall, cpu, rss = run([sys.executable, "-c", code])
            print(f"{label:40s} {wall:7.2f} s wall {cpu:7.2f} CPU-s  peak RSS {rss:6.0f} MB")
        size = sizing()
        per_shape: dict[str, dict] = {}
        measured: dict[str, float] = {}
        for name in args.shapes.split(","):
            n, k, count = SHAPES[name]
            print(f"\n## {name}: one model's jobs as the workflow runs them, {n} x {k} logits "
                  f"({count} such models)")
            d, jobs = prepare_model(work, name)
            override = {"ms_b": {"max_iter": args.ms_iters}} if name == "imagenet" else {}
            label = "calibrate" + (f" (ms_b capped at {args.ms_iters} iterations)" if override else "")
            jobs[label] = calibrate_job(d, spec_of(cfg, **override))
            if args.baseline:
                jobs[label + ", baseline"] = calibrate_job(d, spec_of(cfg, **override),
                                                           src=args.baseline)
            for job, (wall, cpu, rss) in jobs.items():
                print(f"{job:58s} {wall:7.2f} s wall {cpu:7.2f} CPU-s  peak RSS {rss:6.0f} MB")
            calib = jobs[label][1]
            if override:
                per_iter = ms_b_per_iteration(d, args.ms_iters)
                extra = (1000 - args.ms_iters) * per_iter
                print(f"ms_b: {per_iter:.2f} CPU-s per LBFGS iteration (one thread): at most "
                      f"1000 iterations add up to {extra:.0f} CPU-s to the job")
                calib += extra
            entries = n * k
            per_shape[name] = {"import": jobs["import_logits"][1], "split": jobs["split"][1],
                               "calibrate": calib, "count": count,
                               "threads": size["calibrate_threads"](
                                   None, SimpleNamespace(logits=str(d / "logits.npz"))),
                               "entries": entries}
            measured[name] = jobs[label][1]
            if name == "cifar100" and Path(args.default_config).is_file():
                dcfg = load_config(args.default_config)
                runs = {"calibrate with the default config (config.yaml)": None}
                if args.baseline:
                    runs["calibrate with the default config, baseline"] = args.baseline
                for what, src in runs.items():
                    wall, cpu, rss = calibrate_job(d, spec_of(dcfg), src=src)
                    measured.setdefault("default@100", cpu)
                    print(f"{what:58s} {wall:7.2f} s wall {cpu:7.2f} CPU-s  peak RSS {rss:6.0f} MB")
        print(f"\n## The {sum(v['count'] for v in per_shape.values())} models from the measured "
              "jobs (aggregate, tables and report: seconds, not included)")
        total = 0.0
        jobs_1, jobs_sized = [], []
        for name, v in per_shape.items():
            sub = v["count"] * (v["import"] + v["calibrate"]) + v["split"]
            total += sub
            print(f"{name:14s} {v['count']:3d} models x ({v['import']:6.1f} import + "
                  f"{v['calibrate']:8.1f} calibrate) CPU-s + split = {sub:8.0f} CPU-s; "
                  f"sized threads per calibrate job: {v['threads']}")
            for _ in range(v["count"]):
                jobs_1 += [(v["import"], 1), (v["calibrate"], 1)]
                jobs_sized += [(v["import"], 1), (v["calibrate"], v["threads"])]
        print(f"total {total:.0f} CPU-s = {total / 60:.0f} CPU-min")
        span = {c: makespan(jobs_1, c) for c in (2, 16)}
        span_sized = {c: makespan(jobs_sized, c) for c in (2, 16)}
        for c in (2, 16):
            print(f"makespan on {c:2d} cores (simulated from the job costs, greedy longest first): "
                  f"{span[c] / 60:6.1f} min with one thread per job (the rule), "
                  f"{span_sized[c] / 60:6.1f} min with threads sized by N x K (ideal scaling)")
        print("\n## Targets (issue 'real studies at real scale'); figures measured here, under load")
        full = set(per_shape) == set(SHAPES)
        print(target_line("coursework from logits, 2 cores", f"{span[2] / 60:.1f} min" if full else "-",
                          "<= 45 min", span[2] <= 45 * 60 if full else None))
        print(target_line("coursework from logits, 16 cores", f"{span[16] / 60:.1f} min" if full else "-",
                          "<= 10 min", span[16] <= 600 if full else None))
        if "cifar10" in measured:
            print(target_line("CIFAR-10-shaped calibrate job, coursework calibrators",
                              f"{measured['cifar10']:.2f} CPU-s", "<= 3 CPU-s",
                              measured["cifar10"] <= 3))
        if "default@100" in measured:
            print(target_line("default config on a 100-class model",
                              f"{measured['default@100']:.2f} CPU-s", "<= 25 CPU-s",
                              measured["default@100"] <= 25))
        for what, target in (("default study rebuild, 2 cores", "<= 1.25x train/2"),
                             ("no-op", "<= floor+0.5 s"), ("add a model", "<= train+20 s"),
                             ("add a calibrator, default study", "<= 30 s")):
            print(target_line(what, "perf/bench_workflow.py", target, None))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
