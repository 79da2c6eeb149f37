"""What the cross-fitted "best" selection adds to the calibrate step, per model (prints figures;
no assertions on time).

``calbench.selection.crossfit_scores`` refits every candidate calibrator ``k`` times on
``(k - 1) / k`` of the validation half and scores it on the held-out fold. This script times,
per calibrator of the default study (config.yaml's ``calibrators:``), one fit on the whole
validation half (what the calibrate step pays anyway) and the ``k`` fold fits with their
predictions and scores, on synthetic logits of the default study's validation size (5,000 x 10),
and prints the totals: the selection's extra cost per model.

Run: ``python perf/bench_crossfit.py [--samples 5000 --classes 10 --folds 5]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import yaml

from calbench.calibrators import get_calibrator
from calbench.metrics import METRICS
from calbench.selection import crossfit_scores

ROOT = Path(__file__).resolve().parents[1]


def logits(n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(0.0, 1.5, (n, k)) + rng.uniform(1.0, 6.0, (n, 1)) * np.eye(k)[y]
    return z.astype(np.float32), y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=5000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--folds", type=int, default=5)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    compared = {m: METRICS[m] for m in cfg["compare"]["metrics"]}
    z, y = logits(args.samples, args.classes)
    print(f"{args.samples} x {args.classes} validation half, {args.folds} folds, "
          f"metrics {list(compared)}")  # fmt: skip
    print(f"{'calibrator':<14}{'one fit, s':>12}{'cross-fit, s':>14}{'ratio':>8}")
    total_fit = total_cross = 0.0
    for key, entry in cfg["calibrators"].items():
        entry = entry or {}
        method, params = entry.get("method", key), entry.get("params") or {}
        t0 = time.perf_counter()
        get_calibrator(method, **params).fit(z, y)
        one = time.perf_counter() - t0
        t0 = time.perf_counter()
        crossfit_scores({key: lambda m=method, p=params: get_calibrator(m, **p)}, z, y, compared,
                        k=args.folds)  # fmt: skip
        cross = time.perf_counter() - t0
        total_fit += one
        total_cross += cross
        print(f"{key:<14}{one:>12.2f}{cross:>14.2f}{cross / max(one, 1e-9):>8.1f}")
    print(f"{'total':<14}{total_fit:>12.2f}{total_cross:>14.2f}{total_cross / total_fit:>8.1f}")


if __name__ == "__main__":
    main()
