"""config/coursework_logits.yaml on this machine, with synthetic logits of the real shapes.

The published files cannot be downloaded here, so files of their shapes and formats stand in:
10k x 10 (33 CIFAR-10 models), 10k x 100 (35 CIFAR-100), 10k x 200 (5 Tiny ImageNet) and
50k x 1000 (4 ImageNet). For one model of each shape the script runs every job of its chain
exactly as the workflow's rules do (`calbench import-logits`, `split`, `fit-calibrator` for the
seven calibrators with the config's parameters, `evaluate --plot` (metrics and diagram),
`compare`, the grid), each in its own process with one thread, and prints each job's wall
seconds and peak memory (RSS of the process). The ImageNet M-scaling-b fit is a 1000 x 1000 matrix fitted by
LBFGS for up to 1000 iterations; it is timed for --ms-iters iterations and extrapolated.
Then the total for the 77 models is extrapolated from the per-job figures (jobs spread over
--cores cores, as `snakemake --cores N` runs them).

    python perf/bench_coursework_logits.py                 # every job of one model per shape
    python perf/bench_coursework_logits.py --import-only   # the 200 MB import only
    python perf/bench_coursework_logits.py --workflow      # the real workflow, end to end

``--workflow`` runs the study as a user does, end to end: it writes the 77 synthetic files in the
published layout into a local folder (the config's ``mirrors:``), copies the project into a
scratch folder and times ``snakemake --cores N replication --configfile <the config>`` there, in
two runs: (1) everything except the four ImageNet M-scaling-b fits and what depends on them
(``--omit-from`` those four files), then (2) the rest, with those fits capped at --ms-iters LBFGS
iterations (the cap changes the calibrators' ``max_iter``, so run 2 uses
``--rerun-triggers mtime input``: only the missing outputs are built). Run 1 + run 2 is an upper
bound on "everything except the four ImageNet M-scaling-b fits"; the fits themselves are
extrapolated from the per-iteration time above.

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

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
SHAPES = {  # name: (N, K, models in the config)
    "cifar10": (10000, 10, 33),
    "cifar100": (10000, 100, 35),
    "tiny_imagenet": (10000, 200, 5),
    "imagenet": (50000, 1000, 4),
}


def run(cmd: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (MB) of one command in its own
    process. Measured by GNU time around the command: the RSS a child reports through wait4()
    would include the pages of this (large) process it was forked from before exec. CPU seconds
    are what the extrapolation uses: on a machine shared with other work they grow far less
    than wall seconds."""
    full = ["/usr/bin/time", "-f", "BENCH %e %U %S %M", *cmd]
    res = subprocess.run(full, capture_output=True, text=True)
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


def bench_chain(work: Path, name: str, cfg: dict, ms_iters: int) -> dict[str, tuple]:
    """Every job of one model's chain: {job: (wall s, CPU s, peak MB)}."""
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
    logits = d / "logits.npz"
    out["import_logits"] = run(
        calbench(
            "import-logits", "--spec", json.dumps(spec), "--out", logits, "--resources", d / "res"
        )
    )
    out["split"] = run(calbench("split", "--logits", logits, "--out", d / "split.npz"))
    ev = cfg["evaluation"]
    cal_files = []
    for method, entry in cfg["calibrators"].items():
        entry = entry or {}
        params = dict(entry.get("params", {}))
        label = f"fit {method}"
        if name == "imagenet" and method == "ms_b":
            params["max_iter"] = ms_iters
            label = f"fit ms_b ({ms_iters} LBFGS iterations)"
        cal = d / f"{method}.json"
        out[label] = run(
            calbench(
                "fit-calibrator",
                "--logits",
                logits,
                "--split",
                d / "split.npz",
                "--method",
                entry.get("method", method),
                "--params",
                json.dumps(params),
                "--threads",
                1,
                "--out",
                cal,
            )
        )
        cal_files.append(cal)
        ci_args = []  # the rule's --ci-halves / --ci-metrics (ci_args() in common.smk)
        for key, flag in (("ci_halves", "--ci-halves"), ("ci_metrics", "--ci-metrics")):
            if ev.get(key):
                ci_args += [flag, ",".join(ev[key])]
        title = str(entry.get("display", method))
        out[f"evaluate + diagram {method}"] = run(
            calbench(
                "evaluate",
                "--logits",
                logits,
                "--split",
                d / "split.npz",
                "--calibrator",
                cal,
                "--metrics",
                ",".join(ev["metrics"]),
                "--halves",
                ",".join(ev["halves"]),
                "--n-bootstrap",
                ev["n_bootstrap"],
                "--level",
                ev["level"],
                "--seed",
                ev["seed"],
                *ci_args,
                "--plot",
                d / f"{method}.png",
                "--n-bins",
                cfg["plots"]["n_bins"],
                "--style",
                cfg["plots"]["style"],
                "--title",
                title,
                "--out",
                d / f"{method}.csv",
            )
        )
    cmp = cfg["compare"]
    out["compare"] = run(
        calbench(
            "compare",
            "--logits",
            logits,
            "--split",
            d / "split.npz",
            "--calibrators",
            *cal_files,
            "--metrics",
            ",".join(cmp["metrics"]),
            "--baselines",
            ",".join(cmp["baselines"]),
            "--n-bootstrap",
            cmp["n_bootstrap"],
            "--level",
            ev["level"],
            "--seed",
            ev["seed"],
            "--out",
            d / "compare.csv",
        )
    )
    out["plot grid"] = run(
        calbench(
            "plot-reliability",
            "--grid",
            "--logits",
            logits,
            "--split",
            d / "split.npz",
            "--calibrator",
            *cal_files,
            "--n-bins",
            cfg["plots"]["n_bins"],
            "--style",
            cfg["plots"]["style"],
            "--out",
            d / "grid.png",
        )
    )
    return out


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


def bench_workflow(work: Path, config: Path, cores: int, ms_iters: int) -> None:
    """The study end to end through snakemake (module docstring, ``--workflow``)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_workflow import collect, copy_project, run_study, summarize

    cfg = yaml.safe_load(config.read_text())
    mirror = work / "mirror"
    print(f"writing the {len(cfg['models'])} synthetic files into {mirror} ...", flush=True)
    print("files per dataset:", write_mirror(cfg, mirror))
    project = work / "project"
    copy_project(REPO, project)
    cfg["mirrors"] = [str(mirror)]
    bench_cfg = project / "config" / "bench_coursework_logits.yaml"
    bench_cfg.write_text(yaml.safe_dump(cfg, sort_keys=False))
    big = [m for m, e in cfg["models"].items() if e["dataset"] == "imagenet"]
    omit = [f"results/calibrators/imagenet/{m}/ms_b.json" for m in big]
    os.environ["PYTHONPATH"] = str(project / "src")  # the copy's library, as installed code
    base = ["replication", "--configfile", str(bench_cfg), "--quiet", "rules"]
    print(f"\n## run 1: everything but the {len(big)} ImageNet M-scaling-b fits")
    first = run_study(project, cores, [*base, "--omit-from", *omit])
    cfg["calibrators"]["ms_b"].setdefault("params", {})["max_iter"] = ms_iters
    bench_cfg.write_text(yaml.safe_dump(cfg, sort_keys=False))
    print(f"\n## run 2: those fits capped at {ms_iters} LBFGS iterations, and what follows")
    second = run_study(project, cores, [*base, "--rerun-triggers", "mtime", "input"])
    summary = summarize(collect(project))
    print(
        f"\nworkflow jobs: {summary['jobs']}; per rule, from Snakemake's benchmark files "
        "(wall seconds; with warm start a job's CPU runs in the warm process, not counted):"
    )
    for rule, row in sorted(summary["rules"].items()):
        print(
            f"  {rule:28s} {row['jobs']:5d} jobs  {row['wall_s']:8.1f} s wall in all  "
            f"longest {row['max_wall_s']:6.1f} s"
        )
    total = first + second
    print(
        f"\nrun 1 {first:.0f} s + run 2 {second:.0f} s = {total:.0f} s = {total / 60:.1f} min "
        f"on {cores} cores for every job but the {len(big)} ImageNet M-scaling-b fits (plus "
        f"{ms_iters} iterations of each)"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(REPO / "config" / "coursework_logits.yaml"))
    p.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated subset")
    p.add_argument(
        "--ms-iters", type=int, default=5, help="LBFGS iterations of the timed ImageNet ms_b fit"
    )
    p.add_argument("--cores", type=int, default=2, help="cores the workflow would use")
    p.add_argument("--import-only", action="store_true")
    p.add_argument(
        "--workflow",
        action="store_true",
        help="run the study end to end through snakemake (see above)",
    )
    p.add_argument("--keep", default=None, help="work folder to keep (default: a temporary one)")
    args = p.parse_args(argv)
    cfg = yaml.safe_load(Path(args.config).read_text())
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_cl_"))
    env_note = f"{os.cpu_count()} CPUs, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}"
    print(f"# coursework_logits benchmark ({env_note}); work folder {work}")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        if args.workflow:
            bench_workflow(work, Path(args.config), args.cores, args.ms_iters)
            return 0
        print("\n## Import of a 200 MB ImageNet logits file (calbench import-logits, own process)")
        for label, mb, wall, rss in bench_import(work):
            print(f"{label:52s} {mb:7.1f} MB  {wall:6.2f} s  peak RSS {rss:6.0f} MB")
        if args.import_only:
            return 0
        print("\n## Process start-up (every workflow job is one process)")
        startup = {}
        for label, code in (
            ("python + numpy + calbench CLI", "import calbench.cli; import numpy"),
            ("+ torch (torch-based fits)", "import calbench.cli, torch"),
            ("+ matplotlib (plots)", "import calbench.cli, matplotlib.pyplot"),
        ):
            wall, cpu, rss = run([sys.executable, "-c", code])
            startup[label] = cpu
            print(f"{label:40s} {wall:7.2f} s wall {cpu:7.2f} CPU-s  peak RSS {rss:6.0f} MB")
        per_shape = {}
        for name in args.shapes.split(","):
            n, k, count = SHAPES[name]
            print(f"\n## {name}: one model's chain, {n} x {k} logits ({count} such models)")
            jobs = bench_chain(work, name, cfg, args.ms_iters)
            for job, (wall, cpu, rss) in jobs.items():
                print(f"{job:40s} {wall:7.2f} s wall {cpu:7.2f} CPU-s  peak RSS {rss:6.0f} MB")
            per_shape[name] = jobs
        print(f"\n## Extrapolation to the 77 models on {args.cores} cores (from CPU seconds)")
        total = 0.0
        ms_line = None
        for name, jobs in per_shape.items():
            n, k, count = SHAPES[name]
            model_s = sum(
                c
                for j, (_, c, _) in jobs.items()
                if j != "split" and not j.startswith("fit ms_b (")
            )
            ms = [c for j, (_, c, _) in jobs.items() if j.startswith("fit ms_b (")]
            if ms:
                base = jobs["fit ts"][1]  # start-up + data + a cheap fit
                ms_line = (base, max(ms[0] - base, 0.0) / args.ms_iters, count)
            sub = model_s * count + jobs["split"][1]
            total += sub
            print(
                f"{name:14s} {count:3d} models x {model_s:7.1f} CPU-s/model + split = {sub:8.0f} CPU-s"
            )
        print(
            f"every job but the ImageNet M-scaling-b fits: {total:.0f} CPU-s, about "
            f"{total / args.cores / 60:.0f} min on {args.cores} fully used cores (aggregate, "
            "report and replication tables not included: seconds)"
        )
        if ms_line:
            base, per_iter, count = ms_line
            one = base + 1000 * per_iter
            print(
                f"ImageNet M-scaling-b: {per_iter:.2f} CPU-s per LBFGS iteration (1 thread); "
                f"at most 1000 iterations = up to {one / 60:.0f} min per model, "
                f"{count} models up to {count * one / 3600:.1f} CPU-hours"
            )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
