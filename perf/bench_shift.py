"""Speed of the dataset-shift stage's library parts (prints figures; no assertions).

* corruption throughput: every corruption of calbench.shift.corruptions at severities 1-5 on
  N synthetic 28 x 28 grey images (what corrupt-dataset does per corruption);
* shift-logits inference: CPU seconds of each Fashion-MNIST architecture on 10,000 images
  (``time.process_time``, so the figure holds on a loaded machine too); a shift-logits job runs
  corruptions x 5 x the test half (11 x 5 x 5,000 = 27.5 x this in config/shift_fmnist.yaml);
* evaluate-shift on synthetic logits: C corruptions x 5 severities x n test images, K classes,
  every calibrator given, paired bootstrap with B resamples.

    python perf/bench_shift.py [--n 10000] [--corruptions 11] [--bootstrap 200]

Run with OMP_NUM_THREADS=1 for the figures of one core.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def images(n: int, side: int = 28) -> np.ndarray:
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:side, 0:side]
    out = np.zeros((n, side, side, 1), np.uint8)
    for i in range(n):
        cy, cx, r = rng.uniform(9, 19), rng.uniform(9, 19), rng.uniform(4, 9)
        mask = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        out[i, mask, 0] = rng.integers(120, 256)
    return out


def bench_corruptions(n: int) -> None:
    from calbench.shift.corruptions import CORRUPTIONS, corrupt_all_severities

    x = images(n)
    total = 0.0
    print(f"corruptions, severities 1-5, {n} images 28 x 28 grey:")
    for name in CORRUPTIONS:
        t0 = time.process_time()
        corrupt_all_severities(x, name)
        dt = time.process_time() - t0
        total += dt
        print(f"  {name:18s} {dt:7.2f} CPU-s  ({5 * n / dt:9.0f} images/CPU-s)")
    print(f"  all {len(CORRUPTIONS)}: {total:.1f} CPU-s")


def bench_inference(n: int = 10_000) -> None:
    import torch

    from calbench.data import get_dataset
    from calbench.models.fmnist import ARCHITECTURES

    x = torch.from_numpy(images(n).transpose(0, 3, 1, 2).copy())
    preprocess = get_dataset("fashion_mnist").preprocessor({})
    print(
        f"inference CPU seconds on {n} images 28 x 28 (batch 500, {torch.get_num_threads()} thread(s)):"
    )
    for name, ctor in ARCHITECTURES.items():
        model = ctor().eval()
        t0 = time.process_time()
        with torch.inference_mode():
            for i in range(0, n, 500):
                model(preprocess(x[i : i + 500]))
        print(f"  {name:16s} {time.process_time() - t0:6.2f} CPU-s")


def bench_evaluate(n_corr: int, n_boot: int, k: int = 10, n: int = 10_000) -> None:
    from calbench.calibrators import get_calibrator, save_calibrator
    from calbench.logits import save_logits
    from calbench.shift.evaluate import evaluate_shift
    from calbench.shift.logits import save_shift_logits
    from calbench.split import save_split, study_split

    rng = np.random.default_rng(0)
    y = rng.integers(0, k, n)
    z = (np.eye(k)[y] * 2 + rng.normal(size=(n, k))) * 3
    val, test = study_split(n)
    shifted = np.stack(
        [
            np.stack(
                [
                    (np.eye(k)[y[test]] * (2 - 0.3 * s) + rng.normal(size=(len(test), k))) * 3
                    for s in range(5)
                ]
            )  # fmt: skip
            for _ in range(n_corr)
        ]
    ).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        save_logits(d / "c.npz", z, y, order_hash="h", model="m", dataset="d")
        save_split(d / "s.npz", val, test, order_hash=np.str_("h"))
        save_shift_logits(d / "x.npz", logits=shifted, labels=y[test], test_idx=test,
                          corruptions=[f"c{i}" for i in range(n_corr)], sha256=["0"] * n_corr,
                          order_hash="h", model="m", dataset="d")  # fmt: skip
        cals = []
        import yaml

        cfg = yaml.safe_load((Path(__file__).parents[1] / "config.yaml").read_text())
        for name, entry in cfg["calibrators"].items():  # the default study's ten calibrators
            entry = entry or {}
            cal = get_calibrator(entry.get("method", name), **entry.get("params", {}))
            cal.fit(z[val], y[val])
            save_calibrator(cal, d / f"{name}.json")
            cals.append(d / f"{name}.json")
        t0, c0 = time.perf_counter(), time.process_time()
        rows, comp = evaluate_shift(
            d / "x.npz", d / "c.npz", d / "s.npz", cals, metrics=["accuracy", "ece", "nll"],
            compare_metrics=["ece_ub", "nll"], n_bootstrap=n_boot,
        )  # fmt: skip
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(
        f"evaluate-shift ({cpu:.2f} CPU-s): {len(cals)} calibrators x {n_corr} corruptions x 5 severities x "
        f"{len(test)} test images, {n_boot} resamples: {dt:.2f} s ({len(rows)} metric rows, "
        f"{len(comp)} comparisons)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="images per corruption")
    ap.add_argument("--corruptions", type=int, default=11, help="corruptions in evaluate-shift")
    ap.add_argument("--bootstrap", type=int, default=200, help="resamples")
    args = ap.parse_args()
    bench_corruptions(args.n)
    bench_inference()
    bench_evaluate(args.corruptions, args.bootstrap)


if __name__ == "__main__":
    main()
