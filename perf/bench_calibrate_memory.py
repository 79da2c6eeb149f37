"""Peak memory of the calibrate job against the memory rule calibrate declares for it.

For each shape N x K the script writes synthetic logits (perf/bench_coursework_logits.py's
overconfident ones) and the study split, runs one `calbench calibrate` job exactly as rule
calibrate does (its shell line and environment, one thread) with the default study's spec
(config.yaml: every calibrator, the evaluation's bootstrap, the cross-fitted selection), and
prints its wall and CPU seconds, its peak RSS (GNU time) and the mem_mb the workflow declares for
it (workflow/rules/helpers/sizing.smk's calibrate_mem_mb), with the ratio declared / peak. Tall
shapes (many samples, few classes) and wide ones (many classes) are both measured: the memory
model there is fixed + per sample + per logit entry.

    python perf/bench_calibrate_memory.py                          # the shapes below
    python perf/bench_calibrate_memory.py --shapes 50000x10,10000x100
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHAPES = "50000x10,200000x10,400000x10,10000x100,20000x1000"


def _bench():
    """perf/bench_coursework_logits.py as a module (its job runner, data and config helpers)."""
    path = REPO / "perf" / "bench_coursework_logits.py"
    spec = importlib.util.spec_from_file_location("bench_coursework_logits", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def declared_mem_mb(bench, n: int, k: int) -> int:
    """mem_mb rule calibrate declares for N x K logits (sizing.smk, the shape given)."""
    ns = bench.sizing()
    ns["logits_shape"] = lambda path: (n, k)
    return ns["calibrate_mem_mb"](None, SimpleNamespace(logits="(given)"))


def measure(bench, work: Path, n: int, k: int, spec: dict) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one calibrate job on synthetic N x K logits."""
    from calbench.split import save_split, study_split

    d = work / f"{n}x{k}"
    d.mkdir(parents=True, exist_ok=True)
    z, y = bench.synthetic(n, k, 3)
    np.savez(d / "logits.npz", logits=z, labels=y, order_hash="x", model="m", dataset="d")
    save_split(d / "split.npz", *study_split(n))
    del z, y
    return bench.calibrate_job(d, spec)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default=SHAPES, help=f"NxK,... (default {SHAPES})")
    p.add_argument("--config", default=str(REPO / "config.yaml"), help="study config (spec)")
    p.add_argument(
        "--max-iter",
        type=int,
        help="cap the LBFGS iterations of the matrix fits (ms_b, dirichlet) of shapes of at "
        "least 300 classes, whose full runs take hours here; their peak then leaves out the "
        "LBFGS history beyond the cap (sizing.smk adds it from K)",
    )
    args = p.parse_args(argv)
    bench = _bench()
    cfg = bench.load_config(args.config)
    spec = bench.spec_of(cfg)
    capped = (
        bench.spec_of(
            cfg,
            **{
                c: {"max_iter": args.max_iter}
                for c in ("ms_b", "dirichlet")
                if c in cfg["calibrators"]
            },
        )
        if args.max_iter
        else spec
    )
    print(
        f"{'N':>9} {'K':>5} {'wall s':>7} {'CPU s':>7} {'peak MB':>8} {'declared':>8} {'ratio':>6}"
    )
    worst = float("inf")
    with tempfile.TemporaryDirectory(prefix="bench_calmem_") as tmp:
        for shape in args.shapes.split(","):
            n, k = (int(x) for x in shape.lower().split("x"))
            wall, cpu, peak = measure(bench, Path(tmp), n, k, capped if k >= 300 else spec)
            mem = declared_mem_mb(bench, n, k)
            worst = min(worst, mem / peak)
            print(
                f"{n:>9} {k:>5} {wall:>7.1f} {cpu:>7.1f} {peak:>8.0f} {mem:>8} {mem / peak:>6.2f}"
            )
            sys.stdout.flush()
    print(f"smallest declared / peak: {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
