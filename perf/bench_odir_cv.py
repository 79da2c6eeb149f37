"""Cost of Kull et al. 2019's cross-validated ODIR protocol (``dir_odir_cv``, ``ms_odir_cv``,
``dir_l2_cv``) at their sizes, and of the float32 ``precision`` path of isotonic regression
(prints figures; no assertions on time).

The full grid is 432 (lambda, mu) pairs x 5 folds for 10 classes and 243 x 5 for 100 classes
(36 / 27 lambdas for ``dir_l2_cv``); this script times ``--pairs`` pairs on synthetic logits of
the validation size (5,000) and extrapolates linearly to the full grid (fold fits of different
strengths take different numbers of LBFGS iterations, so the extrapolation is rough).

Run: ``python perf/bench_odir_cv.py [--samples 5000 --classes 10 --pairs 2]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from calbench.calibrators import get_calibrator
from calbench.calibrators.odir_cv import kull_grid


def logits(n: int, k: int, seed: int = 0):
    """Synthetic logits of one validation half (``n`` x ``k``), true class boosted by a random
    margin (accuracy and confidence vary per sample); shared with perf/bench_crossfit.py."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    z = rng.normal(0.0, 1.5, (n, k)) + rng.uniform(1.0, 6.0, (n, 1)) * np.eye(k)[y]
    return z.astype(np.float32), y


def validation_half(doc: str, threads: int, **more: int):
    """The command line both scripts share (``--samples``, ``--classes`` and ``more`` integer
    options with their defaults), torch's thread count set, and the synthetic validation half:
    ``(args, z, y)``."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--samples", type=int, default=5000)
    ap.add_argument("--classes", type=int, default=10)
    for name, default in more.items():
        ap.add_argument(f"--{name}", type=int, default=default)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(threads)
    return (args, *logits(args.samples, args.classes))


def main() -> None:
    args, z, y = validation_half(__doc__, threads=2, pairs=2)
    lambdas, mus = kull_grid(args.classes)
    sub_l = lambdas[:: max(1, len(lambdas) // args.pairs)][: args.pairs]
    for name in ("ms_odir_cv", "dir_odir_cv", "dir_l2_cv"):
        kw = {"lambdas": sub_l, "device": "cpu"}
        full = len(lambdas) * (1 if name == "dir_l2_cv" else len(mus))
        if name != "dir_l2_cv":
            kw["mus"] = [mus[len(mus) // 2]]
        cal = get_calibrator(name, **kw)
        t = time.perf_counter()
        cal.fit(z, y)
        sec = time.perf_counter() - t
        per_pair = sec / len(cal.cv_loss_)
        print(
            f"{name}: {args.samples} x {args.classes}, {len(cal.cv_loss_)} pairs x 5 folds in "
            f"{sec:.1f} s ({per_pair:.2f} s per pair); full grid {full} pairs ~ "
            f"{per_pair * full / 60:.0f} min"
        )
    zi, yi = logits(25000, 1000, seed=1)
    for prec in ("float64", "float32"):
        t = time.perf_counter()
        get_calibrator("iso", precision=prec).fit(zi, yi)
        print(f"iso precision={prec}: fit on 25,000 x 1,000 in {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
