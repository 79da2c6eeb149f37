"""What ``evaluation.scheme: crossfit`` costs against ``holdout`` for one model's calibrate job
(prints figures; no assertions on time).

Synthetic logits of the default study's size (``--samples`` 10,000 x ``--classes`` 10, the
generator of perf/bench_odir_cv.py), split as the workflow splits them, and config.yaml's spec
(its calibrators, evaluation and compare sections) once as it is (holdout) and once with
``scheme: crossfit`` (``--folds``, ``--repeats``); each runs as the workflow runs it
(``calbench calibrate``, one thread, ``OMP_NUM_THREADS=1``) in a child process, whose CPU time
(user + system) is printed with the factor. CPU time, not wall time: the machine may be shared.

``--logits`` a model's cached logits (``results/logits/{dataset}/{model}.npz``) and ``--split`` its
split (``results/split/{dataset}/split.npz``) instead: the default study's real logits cost more
than the synthetic ones (their LBFGS and Adam fits take more iterations; figures in
docs/statistics.md, "Cross-fitted evaluation").

Run: ``python perf/bench_crossfit_scheme.py [--samples 10000 --classes 10 --folds 5 --repeats 3]
[--logits L.npz --split S.npz]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml
from bench_odir_cv import logits

from calbench.protocol import CalibrateSpec
from calbench.split import save_split, study_split

ROOT = Path(__file__).resolve().parents[1]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in (("samples", 10000), ("classes", 10), ("folds", 5), ("repeats", 3)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--logits", type=Path, help="a cached logits .npz (default: synthetic)")
    ap.add_argument("--split", type=Path, help="its split .npz (with --logits)")
    args = ap.parse_args()
    if (args.logits is None) != (args.split is None):
        ap.error("--logits and --split go together")
    z, y = logits(args.samples, args.classes)
    from snakemake.utils import validate

    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    validate(cfg, str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        np.savez(tmp / "l.npz", logits=np.asarray(z, np.float32), labels=np.asarray(y, np.int64),
                 order_hash="h", model="m", dataset="d")  # fmt: skip
        save_split(tmp / "s.npz", *study_split(len(y)))
        data = (tmp / "l.npz", tmp / "s.npz") if args.logits is None else (args.logits, args.split)
        times = {}
        for scheme in ("holdout", "crossfit"):
            cfg["evaluation"].update(scheme=scheme, folds=args.folds, repeats=args.repeats)
            spec = tmp / f"{scheme}.json"
            spec.write_text(CalibrateSpec.from_config(cfg).to_json())
            out = tmp / scheme
            cmd = ["calbench", "calibrate", "--logits", data[0], "--split", data[1],
                   "--spec", f"@{spec}", "--threads", "1", "--device", "cpu",
                   "--calibrators-dir", out, "--metrics-dir", out, "--plots-dir", out,
                   "--compare", out / "compare.csv", "--robustness", out / "rob.csv"]  # fmt: skip
            before = _cpu()
            subprocess.run([str(c) for c in cmd], check=True, capture_output=True,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
            times[scheme] = _cpu() - before
            print(f"{scheme:<10}{times[scheme]:>8.1f} CPU-s", file=sys.stdout, flush=True)
    print(f"crossfit / holdout: {times['crossfit'] / times['holdout']:.1f}x "
          f"(folds {args.folds}, repeats {args.repeats})")  # fmt: skip


if __name__ == "__main__":
    main()
