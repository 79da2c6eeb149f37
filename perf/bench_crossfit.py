"""What the cross-fitted "best" selection adds to the calibrate step, per model (prints figures;
no assertions on time).

``calbench.stats.selection.crossfit_scores`` refits every candidate calibrator ``k`` times on
``(k - 1) / k`` of the validation half and scores it on the held-out fold. This script times,
per calibrator of the default study (config.yaml's ``calibrators:``), one fit on the whole
validation half (what the calibrate step pays anyway) and the ``k`` fold fits with their
predictions and scores, on synthetic logits of the default study's validation size (5,000 x 10),
and prints the totals: the selection's extra cost per model.

Run: ``python perf/bench_crossfit.py [--samples 5000 --classes 10 --folds 5]``.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml
from bench_odir_cv import validation_half  # the same synthetic validation half and options

from calbench.calibrators import get_calibrator
from calbench.metrics import METRICS
from calbench.stats.selection import crossfit_scores

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    args, z, y = validation_half(__doc__, threads=1, folds=5)
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    compared = {m: METRICS[m] for m in cfg["compare"]["metrics"]}
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
