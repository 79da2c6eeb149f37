"""What isolating plug-in code costs in ``calbench calibrate`` (calbench.isolation; prints
figures, no assertions on time).

Two parts:

* per call, on one half of ``--samples`` x ``--classes`` float32 logits: a read-only view of the
  logits and labels against a copy of them (what :func:`calbench.isolation.fit` and ``predict``
  hand a calibrator), the output check of a float64 prediction
  (:func:`calbench.isolation.checked_probabilities`) and the digest of the job's four arrays
  that ``calibrate`` verifies before it keeps a result in the reuse cache;
* one ``calibrate`` job on those logits (``--calibrators``, every metric, bootstrap intervals,
  the comparisons and the robustness ranks): its wall time and the SHA-256 of every output file,
  so two runs (e.g. ``PYTHONPATH=<other checkout>/src``) can be compared byte for byte.

Run: ``python perf/bench_isolation.py [--samples 10000 --classes 100 --out DIR]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from calbench.functional import softmax
from calbench.io import array_digest
from calbench.split import save_split, study_split


def _per_call(fn, repeats: int = 50) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _read_only(x):
    v = x.view()
    v.flags.writeable = False
    return v


def micro(z: np.ndarray, y: np.ndarray) -> None:
    half = z[: len(z) // 2]
    labels = y[: len(y) // 2]
    p = softmax(half.astype(np.float64))
    rows = [("read-only views of logits and labels", lambda: (_read_only(half), _read_only(labels))),
            ("copies of logits and labels", lambda: (np.array(half), np.array(labels))),
            ("digest of the job's four arrays", lambda: array_digest(half, labels, half, labels))]  # fmt: skip
    try:
        from calbench.isolation import checked_probabilities
    except ImportError:  # a checkout without isolation
        pass
    else:
        rows.append(("output check of one prediction", lambda: checked_probabilities(
            np.array(p), p.shape, others=[half, p]
        )))  # fmt: skip
    print(f"per call, one half {half.shape} float32:")
    for label, fn in rows:
        print(f"  {label:<40}{_per_call(fn) * 1e3:9.3f} ms")


def job(z, y, out: Path, calibrators: list[str]) -> None:
    from calbench.cli import main

    np.savez(out / "logits.npz", logits=z, labels=y, order_hash="bench", model="m", dataset="d")
    save_split(out / "split.npz", *study_split(len(y)))
    spec = {
        "calibrators": {c: {"method": c, "params": {}, "display": c} for c in calibrators},
        "evaluation": {"metrics": None, "halves": ["test", "val"], "n_bootstrap": 50,
                       "level": 0.95, "seed": 0, "ci_halves": None, "ci_metrics": None},
        "compare": {"metrics": ["ece_ub", "nll", "brier", "accuracy"],
                    "baselines": [calibrators[0]], "n_bootstrap": 50, "select_folds": 5,
                    "select_exclude": []},
        "plots": {"n_bins": 15, "style": "guo"},
    }  # fmt: skip
    (out / "spec.json").write_text(json.dumps(spec))
    res = out / "results"
    t0 = time.perf_counter()
    rc = main([str(a) for a in [
        "calibrate", "--logits", out / "logits.npz", "--split", out / "split.npz",
        "--spec", f"@{out / 'spec.json'}", "--calibrators-dir", res / "cal",
        "--metrics-dir", res / "met", "--plots-dir", res / "plot", "--compare", res / "cmp.csv",
        "--robustness", res / "robustness.csv",
    ]])  # fmt: skip
    secs = time.perf_counter() - t0
    print(f"calibrate job {z.shape}, {calibrators}: exit {rc}, {secs:.1f} s")
    for path in sorted(res.rglob("*")):
        if path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            print(f"  {digest}  {path.relative_to(res)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--calibrators", default="uncalibrated,ts,vs,hist,iso")
    ap.add_argument("--out", help="folder of the job's files (default: a temporary one)")
    ap.add_argument("--no-job", action="store_true", help="the per-call figures only")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    z = (rng.normal(size=(args.samples, args.classes)) * 3.0).astype(np.float32)
    p = softmax(z / 2.0)
    y = np.minimum((rng.random((args.samples, 1)) > np.cumsum(p, axis=1)).sum(axis=1),
                   args.classes - 1).astype(np.int64)  # fmt: skip
    micro(z, y)
    if args.no_job:
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        out.mkdir(parents=True, exist_ok=True)
        job(z, y, out, [c for c in args.calibrators.split(",") if c])


if __name__ == "__main__":
    main()
